package dirlock

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/windows"
)

// readSmallFile reads up to limit bytes of the file at path. Windows has
// no O_NOFOLLOW; the owner record is opened by path.
func readSmallFile(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(limit)))
}

// isStamp reports whether the owner record of the lock directory dir is
// stamp, byte for byte: ours (see the unix version).
func isStamp(dir string, stamp []byte) (bool, error) {
	raw, err := readRecord(dir)
	if err != nil {
		return false, err
	}
	return raw != nil && bytes.Equal(raw, stamp), nil
}

// dirRef is a lock directory this process created. On Windows no handle
// is kept open: an open directory handle makes every other process's
// rename or removal of the directory fail, which would turn a reclaim of
// our stale lock into endless contention. Identity is the file ID taken
// right after mkdir.
//
// In the file form (softfile.go) it is the lock file, likewise not kept
// open: an open file stops filelock's and hold's renames of it too.
type dirRef struct {
	path string
	fi   os.FileInfo
	// file: the file form's lock file, not a directory.
	file bool
}

func openDir(path string) (*dirRef, error) {
	fi, err := lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, &os.PathError{Op: "open", Path: path, Err: windows.ERROR_DIRECTORY}
	}
	return &dirRef{path: path, fi: fi}, nil
}

func (d *dirRef) identity() os.FileInfo { return d.fi }

func (d *dirRef) createOwner(b []byte) error {
	f, err := os.OpenFile(filepath.Join(d.path, OwnerFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

// touch refreshes the mtime by path: without an open handle there is no
// other way. The beat checks the identity just before, so only a lock
// replaced in the microseconds between check and touch could be touched by
// mistake (its heartbeat moves; nothing is deleted).
func (d *dirRef) touch(t time.Time) error { return os.Chtimes(d.path, t, t) }

func (d *dirRef) close() {}

// mtime is the lock's time stamp as the filesystem keeps it. Windows
// holds no handle on the directory, so it reads the path, and only while
// the path still names our directory.
func (d *dirRef) mtime() (time.Time, error) {
	fi, err := lstat(d.path)
	if err != nil {
		return time.Time{}, err
	}
	if !os.SameFile(fi, d.fi) {
		return time.Time{}, os.ErrNotExist
	}
	return fi.ModTime(), nil
}

// withdrawOwner does nothing on Windows: without a handle on our directory
// the record could only be removed through the path, which may hold
// another holder's lock by now.
func (d *dirRef) withdrawOwner() {}

// createFile makes the file form's lock file at path, exclusively, and
// writes b into it; its identity is taken through the handle that made
// it. A file it made and could not write is removed, if the path still
// names it (see the unix version for why that is safe).
func createFile(path string, mode os.FileMode, b []byte) (*dirRef, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode.Perm())
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		_, err = f.Write(b)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if fi != nil {
			if cur, lerr := lstat(path); lerr == nil && os.SameFile(cur, fi) {
				os.Remove(path)
			}
		}
		return nil, err
	}
	return &dirRef{path: path, fi: fi, file: true}, nil
}

// isMkdirContention: Windows answers a mkdir of a directory that another
// process is creating or removing at that instant with ERROR_ACCESS_DENIED
// (EPERM/EACCES to Node), not only "already exists". That is the
// contention this protocol exists to handle; treating it as fatal killed
// writers in the seed and lost their items. A real permission problem
// still surfaces, as a timeout that names the last error.
func isMkdirContention(err error) bool {
	return errors.Is(err, fs.ErrExist) || errors.Is(err, fs.ErrPermission) ||
		errors.Is(err, windows.ERROR_SHARING_VIOLATION)
}

// isRemoveContention: renaming or removing a directory another process is
// inside of (mid-mkdir, an indexer, a virus scanner) fails with access
// denied, a sharing violation or "not empty" while it passes.
func isRemoveContention(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, windows.ERROR_SHARING_VIOLATION) ||
		errors.Is(err, windows.ERROR_DIR_NOT_EMPTY) || errors.Is(err, windows.ERROR_ACCESS_DENIED)
}

func renameNoReplace(from, to string) error {
	// MoveFileEx without MOVEFILE_REPLACE_EXISTING refuses an existing
	// target.
	f, err := windows.UTF16PtrFromString(from)
	if err != nil {
		return err
	}
	t, err := windows.UTF16PtrFromString(to)
	if err != nil {
		return err
	}
	return windows.MoveFileEx(f, t, 0)
}

func rmdir(path string) error { return os.Remove(path) }

// yieldCPU: the yield is made on Linux only (sys_linux.go), where it was measured.
func yieldCPU() {}

// isNotEmpty reports the failure of removing a directory that is not
// empty.
func isNotEmpty(err error) bool {
	return errors.Is(err, windows.ERROR_DIR_NOT_EMPTY)
}
