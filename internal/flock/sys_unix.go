//go:build unix

package flock

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/internal/core"
)

// openLockFile opens (creating if needed) the lock file for locking.
//
// O_NOFOLLOW: the file receives our owner record, so following a symlink
// planted at the lock path would let its maker choose which file we write.
// O_NONBLOCK: opening a FIFO planted at the lock path must not hang; the
// fstat below then rejects it. O_CLOEXEC: a command we start must not
// inherit the lock unless we pass it on purpose.
//
// When the file exists but is not writable by us (another user's lock
// file), it is opened read-only: flock(2) works on any descriptor, so the
// lock still works, only without our owner record.
func openLockFile(path string) (f *os.File, writable bool, err error) {
	const flags = unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|flags, 0o666)
	writable = true
	if err == unix.EACCES || err == unix.EROFS {
		if rfd, rerr := unix.Open(path, unix.O_RDONLY|flags, 0); rerr == nil {
			fd, err, writable = rfd, nil, false
		}
	}
	if err != nil {
		return nil, false, openError(path, err)
	}
	f = os.NewFile(uintptr(fd), path)
	if err := checkRegular(f, path); err != nil {
		f.Close()
		return nil, false, err
	}
	return f, writable, nil
}

// openForInspect opens an existing lock file read-only, never creating it.
func openForInspect(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		if err == unix.ENOENT {
			return nil, &os.PathError{Op: "open", Path: path, Err: os.ErrNotExist}
		}
		return nil, openError(path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	if err := checkRegular(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func checkRegular(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return &core.Error{Op: "open", Path: path, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return &core.Error{Op: "open", Path: path, Err: core.ErrNotRegular,
			Hint: "it is a " + describeMode(fi.Mode()) + "; remove it or choose another lock path"}
	}
	return nil
}

func describeMode(m os.FileMode) string {
	switch {
	case m&os.ModeDir != 0:
		return "directory"
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeSocket != 0:
		return "socket"
	case m&os.ModeDevice != 0:
		return "device"
	case m&os.ModeSymlink != 0:
		return "symbolic link"
	}
	return "special file"
}

func openError(path string, err error) error {
	e := &core.Error{Op: "open", Path: path, Err: err}
	switch err {
	case unix.ELOOP:
		e.Err = core.ErrNotRegular
		e.Hint = "it is a symbolic link, which hold never follows for a lock file; remove it or choose another lock path"
	case unix.EISDIR:
		e.Err = core.ErrNotRegular
		e.Hint = "it is a directory; remove it or choose another lock path (a directory lock is the portable protocol: --protocol dir)"
	case unix.ENOENT:
		e.Hint = "the directory that should hold the lock file does not exist; create it first"
	case unix.EACCES, unix.EPERM:
		e.Hint = "no permission to create the lock file there; choose a writable place with --lock-file or --name"
	case unix.EROFS:
		e.Hint = "the filesystem is read-only; choose a lock path on a writable filesystem"
	case unix.ENOSPC, unix.EDQUOT:
		e.Hint = "the filesystem is full"
	}
	return e
}

// lockFile takes a flock(2) lock, shared or exclusive, blocking or not.
// EINTR is retried: a signal must not end a wait the caller did not end.
func lockFile(f *os.File, shared, block bool) error {
	how := unix.LOCK_EX
	if shared {
		how = unix.LOCK_SH
	}
	if !block {
		how |= unix.LOCK_NB
	}
	for {
		err := unix.Flock(int(f.Fd()), how)
		if err != unix.EINTR {
			return err
		}
	}
}

func unlockFile(f *os.File) error {
	return unix.Flock(int(f.Fd()), unix.LOCK_UN)
}

func isBusy(err error) bool {
	return errors.Is(err, unix.EWOULDBLOCK) || errors.Is(err, unix.EAGAIN)
}

// lockError classifies a failed flock(2). Filesystems that do not do
// locks say so with ENOLCK (NFS without a lock manager), EOPNOTSUPP or
// EINVAL (some FUSE filesystems).
func lockError(path string, err error) error {
	e := &core.Error{Op: "lock", Path: path, Err: err}
	switch err {
	case unix.ENOLCK, unix.EOPNOTSUPP, unix.EINVAL, unix.ENOSYS:
		e.Err = fmt.Errorf("%w: %w", core.ErrUnsupported, err)
		e.Hint = "this filesystem refuses kernel locks; put the lock on a local filesystem with --lock-file or --name, or use the portable protocol (--protocol dir)"
	}
	return e
}
