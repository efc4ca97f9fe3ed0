package hold

import (
	"context"
	"errors"

	"github.com/hold-dev/hold/internal/atomicfile"
	"github.com/hold-dev/hold/internal/flock"
)

// Update changes the file at path under its lock, so that concurrent
// updates by any number of processes never lose one another's change and
// no reader ever sees a torn or empty file.
//
// It takes the exclusive lock "<path>.lock" (the same lock `hold run path`
// and `hold append path` take; LockFile and Named choose another, Shared is
// ignored), reads the file, and calls fn with its content. A missing file
// reads as empty, unless MustExist is given. If fn returns an error,
// nothing is written and Update returns that error unchanged. If fn
// returns the bytes it was given, nothing is written. Otherwise the new
// content replaces the file atomically: it is written to a temp file in
// the same directory, synced, given the original's permission bits (and
// owner, when running as root), and renamed over the file, and the
// directory is synced. Just before the rename Update confirms the lock is
// still held, so a holder that lost its lock publishes nothing. The lock is
// released in every case, a panic in fn included.
//
// When path is a symbolic link, the file it points to is updated and the
// link stays a link. (The lock is still "<path>.lock": use one path for the
// file in every writer, or LockFile.) A directory, a device, or a file whose
// permission bits let nobody write it is refused before anything is locked.
//
// ctx bounds only the wait for the lock. After a successful update, temp
// files that earlier updaters of this file left behind when they were
// killed are removed (see the README's "Guarded updates").
//
// Errors about the lock or the file are *Error with Op "update"; lock
// errors keep their cause (ErrBusy, ErrTimeout, ErrLost) for errors.Is.
// Every error except one leaves the file as it was; the exception is a
// failed fsync of the directory after the rename (an *Error whose cause's
// Op is "fsync"), when the new content is in place but may not survive a
// crash.
func Update(ctx context.Context, path string, fn func(old []byte) ([]byte, error), opts ...Option) error {
	return update(ctx, atomicfile.OS{}, path, fn, opts)
}

// MustExist makes Update and Append fail, with an error matching
// fs.ErrNotExist, when the file does not exist, instead of reading it as
// empty (Update) or creating it (Append).
func MustExist() Option { return func(c *config) { c.mustExist = true } }

// exclusive is appended to the caller's options: a shared lock would let
// two writers read the same old content.
func exclusive(c *config) { c.shared = false }

// update is Update with the file system as a parameter, so tests can make
// any step fail (a full disk, a read-only directory).
func update(ctx context.Context, fsys atomicfile.FS, path string, fn func(old []byte) ([]byte, error), opts []Option) error {
	return guarded(ctx, "update", fsys, path, opts, func(c *config, l *Lock) error {
		// The file may have been created or replaced while we waited, so
		// atomicfile.Update resolves it again under the lock. fn's own
		// error is returned unwrapped.
		var fnErr error
		err := atomicfile.Update(fsys, path, c.mustExist, func(old []byte) ([]byte, error) {
			data, err := fn(old)
			fnErr = err
			return data, err
		}, l.Check)
		if fnErr != nil {
			return fnErr
		}
		if err != nil {
			return fileError("update", path, err)
		}
		return nil
	})
}

// guarded runs body under the exclusive lock of path, the part Update and
// Append share. A directory or device is refused before a lock file is
// created beside it: the file is located (see atomicfile.Locate) before
// the lock is taken, or, with the kernel-lock protocol, only if the lock
// file does not exist yet, so that the usual call spends no system call
// on it (body checks the file again, in full, under the lock). body's
// error is returned as it is (body wraps its own file errors); a failed
// Release is reported when body succeeded.
func guarded(ctx context.Context, op string, fsys atomicfile.FS, path string, opts []Option, body func(c *config, l *Lock) error) (err error) {
	c := newConfig(opts)
	if err := atomicfile.CheckLockFile(op, path, c.lockFile); err != nil {
		return err
	}
	precheck := func() error {
		_, err := atomicfile.Locate(fsys, path)
		return err
	}
	lockOpts := append(opts[:len(opts):len(opts)], exclusive)
	if _, kernel := c.protocol.(flock.Protocol); kernel {
		lockOpts = append(lockOpts, func(c *config) { c.beforeCreate = precheck })
	} else if err := precheck(); err != nil {
		return fileError(op, path, err)
	}
	l, err := Acquire(ctx, path, lockOpts...)
	if err != nil {
		// A lock error, or the precheck's file error.
		return fileError(op, path, err)
	}
	defer func() {
		if rerr := l.Release(); err == nil && rerr != nil {
			err = relabel(op, rerr)
		}
	}()
	return body(c, l)
}

// relabel gives a lock error from Acquire or Release the operation's name,
// keeping its cause, path and holder.
func relabel(op string, err error) error {
	var e *Error
	if !errors.As(err, &e) {
		return &Error{Op: op, Err: err}
	}
	c := *e
	c.Op = op
	return &c
}

// fileError wraps an error about the target file itself. An error that is
// already an *Error (a lost lock found by Check) is only relabelled.
func fileError(op, path string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return relabel(op, err)
	}
	return &Error{Op: op, Path: path, Err: err, Hint: atomicfile.Hint(err)}
}
