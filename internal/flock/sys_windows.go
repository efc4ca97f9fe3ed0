package flock

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/windows"

	"github.com/hold-dev/hold/lock"
)

// On Windows, LockFileEx locks are mandatory: locked bytes cannot be read
// through other handles. Locking the owner record would hide it from the
// very waiters that want to know who holds the lock, so the lock covers one
// byte far past any record instead.
const (
	lockOffsetLow  = 0
	lockOffsetHigh = 0x7fffffff
)

// lockFile is an open lock file. On Windows it is simply an *os.File.
type lockFile struct {
	f   *os.File
	dir bool // never set: Windows locks no directory
	// openGen: see the unix version; unused, as no file is ever found
	// in the verified cache here (stamp).
	openGen uint64
	known   cacheAnswer // see the unix version
}

func (f *lockFile) file() *os.File { return f.f }
func (f *lockFile) close() error   { return f.f.Close() }

func (f *lockFile) readAt(b []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(b, off)
	if err == io.EOF {
		err = nil
	}
	return n, err
}

// readOnce is readAt: ReadAt stops at the end of the file by itself.
func (f *lockFile) readOnce(b []byte, off int64) (int, error) { return f.readAt(b, off) }

func (f *lockFile) writeAt(b []byte, off int64) error {
	_, err := f.f.WriteAt(b, off)
	return err
}

func (f *lockFile) truncate(size int64) error { return f.f.Truncate(size) }

func (f *lockFile) size() (int64, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// namedBy reports whether path still names the file f is open on. A
// missing path is "no"; an error means it cannot tell.
func (f *lockFile) namedBy(path string) (bool, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return false, err
	}
	pi, err := os.Lstat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return false, nil
		}
		return false, err
	}
	return os.SameFile(fi, pi), nil
}

// isFile reports whether f is open on the file fi describes.
func (f *lockFile) isFile(fi os.FileInfo) bool {
	own, err := f.f.Stat()
	return err == nil && os.SameFile(own, fi)
}

// replaced reports whether the file f is open on has lost its name since
// the open (see the unix version): the path is asked.
func (f *lockFile) replaced(path string) bool {
	same, err := f.namedBy(path)
	return err == nil && !same
}

// otherUsers: Windows has no root that writes everyone's files unasked
// (an administrator's write to another user's file is a permission the
// file grants), so ownership is left to the file's access control.
func (f *lockFile) otherUsers() bool { return false }

// fileKey and fileStamp are what the verified cache keys on; Windows
// gives no cheap change time at the open, so every acquisition reads the
// file (stamp reports false).
type (
	fileKey   struct{ vol, idx uint64 }
	fileStamp struct{ ctime, size int64 }
)

func (f *lockFile) stamp() (fileStamp, bool) { return fileStamp{}, false }

// linkCount returns the file's number of hard links.
func (f *lockFile) linkCount() uint64 {
	var info windows.ByHandleFileInformation
	if err := windows.GetFileInformationByHandle(windows.Handle(f.f.Fd()), &info); err != nil {
		return 0 // unknown: not provably hold's to write
	}
	return uint64(info.NumberOfLinks)
}

// procFd is the handle for proc.LockHolders (which has nothing to say on
// Windows).
func (f *lockFile) procFd() uintptr { return f.f.Fd() }

// openMode says how openLockFile opens a lock file (see sys_unix.go's).
// On Windows a directory cannot be locked, so explicit changes nothing.
type openMode struct {
	beforeCreate func() error
	explicit     bool
	readOnly     bool
	perm         uint32 // ignored: Windows files have no permission bits
}

func openLockFile(path string, m openMode) (*lockFile, bool, error) {
	beforeCreate := m.beforeCreate
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, false, &lock.Error{Op: "open", Path: path, Err: err}
	}
	const share = windows.FILE_SHARE_READ | windows.FILE_SHARE_WRITE | windows.FILE_SHARE_DELETE
	// FILE_FLAG_OPEN_REPARSE_POINT opens a symlink itself rather than its
	// target, the Windows counterpart of O_NOFOLLOW; the type check below
	// then refuses it.
	const flags = windows.FILE_ATTRIBUTE_NORMAL | windows.FILE_FLAG_OPEN_REPARSE_POINT
	writable := !m.readOnly
	access := uint32(windows.GENERIC_READ | windows.GENERIC_WRITE)
	if m.readOnly {
		access = windows.GENERIC_READ
	}
	disposition := uint32(windows.OPEN_ALWAYS)
	if beforeCreate != nil {
		// An existing file first, so that beforeCreate runs only when
		// the file is about to be created.
		disposition = windows.OPEN_EXISTING
	}
	h, err := windows.CreateFile(p, access, share, nil, disposition, flags, 0)
	if err == windows.ERROR_FILE_NOT_FOUND && beforeCreate != nil {
		if err := beforeCreate(); err != nil {
			return nil, false, err
		}
		h, err = windows.CreateFile(p, access, share, nil, windows.OPEN_ALWAYS, flags, 0)
	}
	if err == windows.ERROR_ACCESS_DENIED && !m.readOnly {
		if rh, rerr := windows.CreateFile(p, windows.GENERIC_READ, share, nil, windows.OPEN_EXISTING, flags, 0); rerr == nil {
			h, err, writable = rh, nil, false
		}
	}
	if err != nil {
		return nil, false, openError(path, err)
	}
	f := os.NewFile(uintptr(h), path)
	if err := checkRegular(f, path); err != nil {
		f.Close()
		return nil, false, err
	}
	return &lockFile{f: f}, writable, nil
}

func openForInspect(path string) (*lockFile, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, err
	}
	const share = windows.FILE_SHARE_READ | windows.FILE_SHARE_WRITE | windows.FILE_SHARE_DELETE
	h, err := windows.CreateFile(p, windows.GENERIC_READ, share, nil, windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		if err == windows.ERROR_FILE_NOT_FOUND || err == windows.ERROR_PATH_NOT_FOUND {
			// No lock file, or not even its directory: either way free,
			// as on unix.
			return nil, &os.PathError{Op: "open", Path: path, Err: os.ErrNotExist}
		}
		return nil, openError(path, err)
	}
	f := os.NewFile(uintptr(h), path)
	if err := checkRegular(f, path); err != nil {
		f.Close()
		return nil, err
	}
	return &lockFile{f: f}, nil
}

func checkRegular(f *os.File, path string) error {
	fi, err := f.Stat()
	if err != nil {
		return &lock.Error{Op: "open", Path: path, Err: err}
	}
	if !fi.Mode().IsRegular() {
		return &lock.Error{Op: "open", Path: path, Err: lock.ErrNotRegular,
			Hint: "it is not a lock file (a directory or a device); choose another lock path"}
	}
	return nil
}

func openError(path string, err error) error {
	e := &lock.Error{Op: "open", Path: path, Err: err}
	// CreateFile of a directory without FILE_FLAG_BACKUP_SEMANTICS is
	// refused as access denied: say what it is, as on unix (the front ends'
	// InspectAny then recognises a portable lock's directory).
	if err == windows.ERROR_ACCESS_DENIED {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.IsDir() {
			e.Err, e.Hint = lock.ErrNotRegular, "remove it or choose another lock path"
			return e
		}
	}
	switch err {
	case windows.ERROR_PATH_NOT_FOUND:
		e.Hint = MissingDirHint
	case windows.ERROR_ACCESS_DENIED:
		e.Hint = "no permission to open the lock file there; choose another lock path"
	}
	return e
}

func (f *lockFile) lock(shared, block bool) error {
	var flags uint32
	if !shared {
		flags |= windows.LOCKFILE_EXCLUSIVE_LOCK
	}
	if !block {
		flags |= windows.LOCKFILE_FAIL_IMMEDIATELY
	}
	ol := &windows.Overlapped{Offset: lockOffsetLow, OffsetHigh: lockOffsetHigh}
	return windows.LockFileEx(windows.Handle(f.f.Fd()), flags, 0, 1, 0, ol)
}

func (f *lockFile) unlock() error {
	ol := &windows.Overlapped{Offset: lockOffsetLow, OffsetHigh: lockOffsetHigh}
	return windows.UnlockFileEx(windows.Handle(f.f.Fd()), 0, 1, 0, ol)
}

// release unlocks and closes.
func (f *lockFile) release() (unlockErr, closeErr error) {
	unlockErr = f.unlock()
	return unlockErr, f.close()
}

func isBusy(err error) bool {
	return errors.Is(err, windows.ERROR_LOCK_VIOLATION) || errors.Is(err, windows.ERROR_IO_PENDING)
}

func lockError(path string, err error) error {
	e := &lock.Error{Op: "lock", Path: path, Err: err}
	if errors.Is(err, windows.ERROR_NOT_SUPPORTED) || errors.Is(err, windows.ERROR_INVALID_FUNCTION) {
		e.Err = fmt.Errorf("%w: %w", lock.ErrUnsupported, err)
		e.Hint = "this filesystem refuses byte-range locks; use a local volume or the portable protocol (--protocol dir)"
	}
	return e
}

// key identifies the file for the verified cache (unused: stamp reports
// false).
func (f *lockFile) key() fileKey { return fileKey{} }

// kernelNamesHolders: nothing but the owner record can name a holder on
// Windows, so it is written at once.
const kernelNamesHolders = false

// identify: openLockFile has looked at the file already (checkRegular),
// and Windows has no cheaper way to tell that it kept its name than
// asking the path (replaced).
func (f *lockFile) identify(explicit bool) error { return nil }

// refresh: nothing to look at again (see identify).
func (f *lockFile) refresh() {}
