package hold

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"

	"github.com/hold-dev/hold/internal/atomicfile"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/guard"
)

// Update changes the file at path under its lock, so that concurrent
// updates by any number of processes never lose one another's change and
// no reader ever sees a torn or empty file.
//
// It takes the exclusive lock "<path>.lock" (the same lock `hold run path`
// and `hold append path` take; LockFile and Named choose another, and
// Shared is refused with ErrInvalidOption; for a path whose name ends in
// ".lock", which Acquire locks itself, it takes "<path>.lock" and the
// file's own kernel lock, so that the two still exclude each other: see
// ForRewrite), reads the file, and calls fn with its content. A missing
// file reads as empty, unless MustExist is given. If fn returns an error,
// nothing is written and Update returns that error unchanged. If fn
// returns empty content (nil included), nothing is written and Update
// returns an *Error matching ErrEmpty, unless AllowEmpty is given: that
// is how no reader ever sees an empty file, and `hold update` has the
// same rule (--allow-empty). If fn returns the bytes it was given,
// nothing is written. Otherwise the new
// content replaces the file atomically: it is written to a temp file in
// the same directory, given everything the original is besides its
// content (owner and group, permission bits, extended attributes, which
// hold POSIX ACLs and SELinux labels), synced, and renamed over the file,
// and the directory is synced. Just before the rename Update confirms the
// lock is still held, so a holder that lost its lock publishes nothing.
// The lock is released in every case, a panic in fn included. fn's input
// and output are in memory; `hold update` streams instead.
//
// What the replacement could not keep is refused before fn is called,
// with the file left as it was: a file with other hard links, which would
// keep the old content (ErrHardLinked; AllowSplit accepts it), and a file
// whose owner or group this process cannot give a new file, because it is
// not root and not the owner or not in the group (ErrOwnerNotKept;
// AllowOwnerChange accepts it). An extended attribute that cannot be
// copied (ErrXattrNotKept) is found after fn, and nothing is published.
// All three match fs.ErrPermission too.
//
// When path is a symbolic link, the file it points to is updated and the
// link stays a link. (The lock is still "<path>.lock": use one path for the
// file in every writer, or LockFile.) A link in a sticky world-writable
// directory such as /tmp is followed only if it belongs to this process's
// user or to the directory's owner, the kernel's fs.protected_symlinks
// rule (ErrProtectedSymlink otherwise). A directory, a device, or a file
// whose permission bits let nobody write it is refused before anything is
// locked.
//
// ctx bounds only the wait for the lock. After a successful update, temp
// files that earlier updaters of this file left behind when they were
// killed are removed (see docs/update.md, "Crashes and leftovers").
//
// Errors about the lock or the file are *Error with Op "update"; lock
// errors keep their cause (ErrBusy, ErrTimeout, ErrLost) for errors.Is.
// Every error leaves the file as it was. Once the new content has been
// renamed into place the update has succeeded, and Update returns nil even
// if the directory could not be synced afterwards (so the change might not
// survive a crash of the machine): that is logged at slog.LevelWarn
// through Logger, if one was given, as is an owner change that
// AllowOwnerChange let happen.
func Update(ctx context.Context, path string, fn func(old []byte) ([]byte, error), opts ...Option) error {
	return update(ctx, atomicfile.OS{}, path, fn, opts)
}

// The refusals of Update (and, for a symlink, Append): each leaves the file
// as it was and matches fs.ErrPermission too.
var (
	// ErrProtectedSymlink: path, or a link it leads through, is a symlink
	// in a sticky world-writable directory (like /tmp) that belongs
	// neither to this process's user nor to the directory's owner. The
	// kernel's fs.protected_symlinks rule refuses to follow such a link
	// for anyone else, since anyone may plant one there; hold follows the
	// links itself, so it applies the rule itself.
	ErrProtectedSymlink = atomicfile.ErrProtectedSymlink
	// ErrHardLinked: the file has other hard links, which a replacement
	// would split off with the old content (see AllowSplit).
	ErrHardLinked = atomicfile.ErrHardLinked
	// ErrOwnerNotKept: the replacement cannot be given the file's owner
	// and group (see AllowOwnerChange).
	ErrOwnerNotKept = atomicfile.ErrOwnerNotKept
	// ErrXattrNotKept: an extended attribute of the file (an ACL, an
	// SELinux label, a user.* attribute) cannot be copied to the
	// replacement: setting security.* and trusted.* attributes takes
	// privilege, and a file system may not support one.
	ErrXattrNotKept = atomicfile.ErrXattrNotKept
	// ErrEmpty: fn gave Update empty content, which it writes only with
	// AllowEmpty. (It does not match fs.ErrPermission.)
	ErrEmpty = atomicfile.ErrEmpty
)

// update is Update with the file system as a parameter, so tests can make
// any step fail (a full disk, a read-only directory).
func update(ctx context.Context, fsys atomicfile.FS, path string, fn func(old []byte) ([]byte, error), opts []Option) error {
	c, err := configFor(inUpdate, path, opts)
	if err != nil {
		return err
	}
	if err := c.refuseReplacingOwnLock(path); err != nil {
		return err
	}
	return c.guarded(ctx, "update", fsys, path, func(l *Lock) error {
		// The file may have been created or replaced while we waited, so
		// atomicfile.Update resolves it again under the lock. fn's own
		// error is returned unwrapped.
		var fnErr error
		err := atomicfile.UpdateWith(fsys, path, c.fileOptions(), func(old []byte) ([]byte, error) {
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

// fileOptions are the atomicfile options the config asks for. What an
// update that succeeded should tell (a directory that could not be synced,
// an owner that changed) goes to the Logger as a warning.
func (c *config) fileOptions() atomicfile.Options {
	o := atomicfile.Options{MustExist: c.mustExist, AllowSplit: c.allowSplit, AllowOwnerChange: c.allowOwnerChange, AllowEmpty: c.allowEmpty}
	if l := c.logger; l != nil {
		o.Warn = func(err error) { l.Warn(err.Error()) }
	}
	return o
}

// guarded runs body under the exclusive lock of path, the part Update and
// Append share, with c their config. A directory or device is refused
// before a lock file is created beside it: the file is located (see
// atomicfile.Locate) before the lock is taken, or, with the kernel-lock
// protocol, only if the lock file does not exist yet, so that the usual
// call spends no system call on it (body checks the file again, in full,
// under the lock). body's error is returned as it is (body wraps its own
// file errors); a failed Release is reported when body succeeded.
func (c *config) guarded(ctx context.Context, op string, fsys atomicfile.FS, path string, body func(l *Lock) error) (err error) {
	if err := atomicfile.CheckLockFile(op, path, c.lockFile); err != nil {
		return err
	}
	precheck := func() error {
		_, err := atomicfile.Locate(fsys, path)
		return err
	}
	// Shared is refused here (see accepts), and stays off: a shared lock
	// would let two writers read the same old content. The file is
	// rewritten, so its lock stays apart from it (ForRewrite).
	c.shared, c.rewrite = false, true
	if _, kernel := c.protocol.(flock.Protocol); kernel {
		c.beforeCreate = precheck
	} else if err := precheck(); err != nil {
		return fileError(op, path, err)
	}
	l, err := c.acquire(ctx, path)
	if err != nil {
		// A lock error, or the precheck's file error.
		return fileError(op, path, err)
	}
	defer func() {
		// A refused or failed update leaves no lock file it created.
		release := l.Release
		if err != nil {
			release = l.Discard
		}
		if rerr := release(); err == nil && rerr != nil {
			err = relabel(op, rerr)
		}
	}()
	return body(l)
}

// rewriteDirHint replaces the hint of a lock file beside a file to be
// rewritten (ForRewrite, as Update and the command line's update and
// append take it) that could not be made for lack of permission or on a
// read-only filesystem: for an update, another lock path would not help,
// since it renames a new file into that same directory.
func (c *config) rewriteDirHint(target string, err error) error {
	var e *Error
	if !c.rewrite || c.lockFile != "" || c.named || !errors.As(err, &e) {
		return err
	}
	dir := filepath.Dir(target)
	switch {
	case errors.Is(err, syscall.EROFS):
		e.Hint = "the filesystem holding " + dir + " is read-only: an update, which writes a new file there and renames it over the old one, cannot change a file there at all"
	case errors.Is(err, fs.ErrPermission):
		e.Hint = "you may not create files in " + dir + ": an update writes a new file there and renames it over the old one, so it needs that whatever the lock path; update as a user who may write " + dir + ", or make it writable for you; an append, which writes in place, may take its lock elsewhere with --lock-file or --name"
	}
	return err
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

// fileError wraps an error about the target file itself (guard.Label).
// An error that is already an *Error (a lost lock found by Check) is only
// relabelled.
func fileError(op, path string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return relabel(op, err)
	}
	return guard.Label(op, path, err)
}

// ErrFileNotRegular is the cause of an Update or Append error about a file
// that is not a regular file (a device, a socket, a named pipe): it cannot
// be replaced or appended to atomically, so it is refused before anything
// is locked. (A lock path that is not a regular file is ErrNotRegular.)
var ErrFileNotRegular = atomicfile.ErrNotRegular
