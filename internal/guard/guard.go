// Package guard holds what a guarded write (hold.Update, hold.Append)
// refuses before it locks anything, and how it labels an error about its
// file, for the root and for the front ends that write a file themselves
// under a hold lock (hold update and hold append, the agent's update and
// append). It sits below the root: it imports the contract and the
// atomic file code, never the root.
package guard

import (
	"errors"

	"github.com/hold-dev/hold/internal/atomicfile"
	"github.com/hold-dev/hold/lock"
)

// Refusal returns the error that Update or Append (op "update" or
// "append") would return at once for path, before anything is locked or
// created, or nil: a lock file that is path itself (lock.ErrLockIsTarget;
// lockFile is the LockFile option's path, or ""), or a path that cannot be
// a file they write (a directory, atomicfile.ErrNotRegular, a file whose
// permission bits let nobody write it, a NUL byte). A missing file passes:
// Update and Append create it. They make the same checks themselves; a
// front end that checks requests of its own before it writes calls
// Refusal first, so that these errors come before its own.
func Refusal(op, path, lockFile string) error {
	if err := atomicfile.CheckLockFile(op, path, lockFile); err != nil {
		return err
	}
	if _, err := atomicfile.Locate(atomicfile.OS{}, path); err != nil {
		return Label(op, path, err)
	}
	return nil
}

// Label returns err, met by operation op on the file at path, as Update
// and Append report an error about their file: a *lock.Error with op,
// path and a hint that says what to do (make the file writable, free some
// disk). An err that is already a *lock.Error is returned as it is.
func Label(op, path string, err error) error {
	var e *lock.Error
	if errors.As(err, &e) {
		return err
	}
	return &lock.Error{Op: op, Path: path, Err: err, Hint: atomicfile.Hint(err)}
}
