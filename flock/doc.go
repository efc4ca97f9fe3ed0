// Package flock is gofrs/flock's API over hold's kernel lock: a program
// that uses github.com/gofrs/flock switches by changing that import path to
// github.com/hold-dev/hold/flock and nothing else. New, NewFlock, the
// options SetFlag and SetPermissions, and the methods Lock, RLock, TryLock,
// TryRLock, TryLockContext, TryRLockContext, Unlock, Close, Locked,
// RLocked, Path, Stat and String keep gofrs/flock's signatures and meaning:
// a busy try returns (false, nil), a second Lock of a locked Flock returns
// at once, Unlock of an unlocked Flock returns nil, and the file is never
// removed.
//
// The lock is taken on the path itself (hold.LockFile), so a process that
// still uses gofrs/flock, flock(1), or hold with the same lock file shares
// the one lock: each excludes the others. Two Flock values on one path
// exclude each other inside one process as well, as they do under gofrs.
//
// What hold adds comes through extra methods only: Held gives the
// *hold.Lock behind a locked Flock (its fencing token, owner record and
// loss channel), and Status says who holds the path, from any process,
// without taking it. hold writes its owner record into an empty lock file
// (or one holding a record of its own) while the lock is held; a file that
// holds anything else is locked without being written, as flock(1) locks
// it.
//
// Differences a caller can see: hold opens the lock file itself, so of the
// flag given to SetFlag only O_CREATE counts (without it a missing file is
// an error matching fs.ErrNotExist, as under gofrs); errors are *hold.Error
// values that wrap the system's error. Changing a held lock's mode (Lock
// while RLocked, RLock while Locked) gives the first mode up and then takes
// the second, as flock(2) does on Linux, where the conversion is not atomic
// either; a try whose conversion finds the lock busy takes the first mode
// back when it can, and reports the Flock unlocked when it cannot.
package flock
