package dirlock

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/hold-dev/hold/lock"
)

// The file form of the protocol (lock.Request's SoftFile). Python
// filelock's SoftFileLock cannot wait for a lock directory: it opens the
// lock path as a file and fails (IsADirectoryError). So a lock that is to
// exclude filelock's SoftFileLock holders both ways is held as one of
// theirs is: a plain file at the lock path, created with O_EXCL, holding
// filelock's record of the process that created it (filelockSoftRecord).
//
// Only the claim differs from a lock directory's (claimFile in place of
// claimDir); the rest is the protocol's, unchanged:
//
//   - a waiter finds the file and judges it where it judges filelock's own
//     (judgeLockedFile, judgeFilelock): live while the process it names
//     runs, however old; stale at once when that process is gone. filelock
//     judges it by the same record and the same rules (owner_is_stale), so
//     neither ever takes it from a live holder, and each takes it from a
//     dead one;
//   - the reclaim of a stale one is the guarded reclaimFile of every plain
//     file at a lock path;
//   - the heartbeat checks that the path still names the file created
//     (its identity) holding the record written, and marks the lock lost
//     when it does not. It refreshes nothing: filelock reads no age from
//     a holder's file, and the file's mtime is when the lock was taken,
//     which `hold status` reports;
//   - release removes the file through removeIfSame, which moves it aside
//     and deletes it only if what it moved is that file, with that record.
//
// The record has no room for a fencing token: Fence is 0 and TokenError
// says why. A released record's token met at the path is handed on,
// unchanged, to the next holder (attempt.carry).

// claimFile is the claim step of a pass of the file form: create the
// lock file exclusively and write the record in the same step, before the
// pass reads it back. When it made nothing (c.d nil) it answers passBusy
// for a path someone has, for the pass to judge, or the pass's outcome
// and error.
func (a *attempt) claimFile() (c claimed, out outcome, err error) {
	owner := a.owner
	owner.Fence = 0
	stamp, ok := filelockSoftRecord()
	if !ok {
		return c, passFailed, &lock.Error{Op: "acquire", Path: a.path, Err: lock.ErrUnsupported,
			Hint: "this host's name is too long for filelock's SoftFileLock record as hold writes it; take the lock in the directory form (hold.lock(protocol=\"dir\"), --protocol dir)"}
	}
	d, err := createFile(a.path, a.mode, stamp)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return c, passBusy, nil
		}
		if isMkdirContention(err) {
			// Windows: another process is creating or removing the file.
			a.lastErr = err
			return c, passBusy, nil
		}
		return c, passFailed, &lock.Error{Op: "acquire", Path: a.path, Err: err, Hint: resourceHint(err)}
	}
	owner.StartedAt = d.fi.ModTime()
	return claimed{d: d, owner: owner, stamp: stamp}, passHeld, nil
}

// checkFile is check for the file form: ours when the path names the file
// we created (by identity: while our descriptor is open, on unix, no other
// file can have its inode number) and that file holds our record. Every
// holder of this process writes the same record, so the record alone
// proves nothing; read first, then the identity, so that a record read
// from a successor's file is caught by the identity that follows.
func checkFile(path string, d *dirRef, stamp []byte) ownership {
	same, rerr := isFileStamp(path, stamp)
	fi, err := lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return notOurs
	case err != nil:
		return unknown
	case !os.SameFile(fi, d.identity()):
		return notOurs
	case rerr != nil:
		return inconclusive
	case !same:
		// Our file, rewritten by someone (filelock retires a displaced
		// marker by writing into it): no longer the record of a holder.
		return notOurs
	}
	return ours
}

// isFileStamp reports whether the plain file at path holds exactly stamp.
// Absence is a fact: false with a nil error.
func isFileStamp(path string, stamp []byte) (bool, error) {
	b, err := readSmallFile(path, len(stamp)+1)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) {
			return false, nil
		}
		return false, err
	}
	return bytes.Equal(b, stamp), nil
}

// refresh is the heartbeat's write: the directory's mtime, which waiters
// judging by age read. A lock file is never refreshed (see above).
func (d *dirRef) refresh(t time.Time) error {
	if d.file {
		return nil
	}
	return d.touch(t)
}

// TokenError says why the lock has no fencing token when Fence is 0.
func (h *handle) TokenError() error {
	if h.dir.file {
		return &lock.Error{Op: "token", Path: h.path, Err: lock.ErrNoToken,
			Hint: "the lock is held in the portable protocol's file form (filelock's SoftFileLock record), which has no room for a fencing token"}
	}
	if h.owner.Fence != 0 {
		return nil
	}
	return &lock.Error{Op: "token", Path: h.path, Err: lock.ErrNoToken, Hint: "the dir protocol keeps no fencing token"}
}
