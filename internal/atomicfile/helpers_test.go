package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
)

// faultFS is the real file system with chosen steps failing, to show what
// each failure leaves behind: a full disk, a failing device, a read-only
// file system, a directory that cannot be synced. It also counts the
// calls a test asks about.
type faultFS struct {
	OS
	createErr   error // OpenFile with O_CREATE fails
	writeErr    error // File.Write writes half, then fails
	syncErr     error // File.Sync fails
	closeErr    error // File.Close of a file opened for writing fails
	chmodErr    error // File.Chmod fails
	truncateErr error // File.Truncate fails
	renameErr   error // Rename fails
	syncDirErr  error // SyncDir fails
	syncFSErr   error // SyncFS fails
	writableErr error // Writable fails
	listErr     error // Xattrs fails
	// chownErr makes File.Chown fail; with chownOwnerOnly, only a chown
	// that changes the owner (uid != -1).
	chownErr       error
	chownOwnerOnly bool
	// xattrErr makes setting (or removing) extended attribute xattrName
	// fail.
	xattrName string
	xattrErr  error
	// onWrite runs before each write to a file opened for writing.
	onWrite func(f File)

	mu                                    sync.Mutex
	syncDirs, syncFSs, writables, removes int
	renamed                               [][2]string
}

func (f *faultFS) count(n *int) {
	f.mu.Lock()
	*n++
	f.mu.Unlock()
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if f.createErr != nil && flag&os.O_CREATE != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: f.createErr}
	}
	file, err := f.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, writing: flag&(os.O_WRONLY|os.O_RDWR) != 0}, nil
}

func (f *faultFS) Rename(oldpath, newpath string) error {
	if f.renameErr != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: f.renameErr}
	}
	f.mu.Lock()
	f.renamed = append(f.renamed, [2]string{oldpath, newpath})
	f.mu.Unlock()
	return f.OS.Rename(oldpath, newpath)
}

func (f *faultFS) Remove(name string) error {
	f.count(&f.removes)
	return f.OS.Remove(name)
}

func (f *faultFS) SyncDir(name string) error {
	f.count(&f.syncDirs)
	if f.syncDirErr != nil {
		return &fs.PathError{Op: "fsync", Path: name, Err: f.syncDirErr}
	}
	return f.OS.SyncDir(name)
}

func (f *faultFS) SyncFS(name string) error {
	f.count(&f.syncFSs)
	if f.syncFSErr != nil {
		return &fs.PathError{Op: "syncfs", Path: name, Err: f.syncFSErr}
	}
	return f.OS.SyncFS(name)
}

func (f *faultFS) Writable(name string) error {
	f.count(&f.writables)
	if f.writableErr != nil {
		return &fs.PathError{Op: "access", Path: name, Err: f.writableErr}
	}
	return f.OS.Writable(name)
}

func (f *faultFS) Xattrs(file File) ([]Xattr, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	return f.OS.Xattrs(unwrap(file))
}

func (f *faultFS) SetXattr(file File, name string, value []byte) error {
	if f.xattrErr != nil && name == f.xattrName {
		return f.xattrErr
	}
	return f.OS.SetXattr(unwrap(file), name, value)
}

func (f *faultFS) RemoveXattr(file File, name string) error {
	if f.xattrErr != nil && name == f.xattrName {
		return f.xattrErr
	}
	return f.OS.RemoveXattr(unwrap(file), name)
}

// unwrap returns the real file under a faultFile.
func unwrap(file File) File {
	if ff, ok := file.(*faultFile); ok {
		return ff.File
	}
	return file
}

type faultFile struct {
	File
	fs      *faultFS
	writing bool
}

func (f *faultFile) Write(p []byte) (int, error) {
	if f.fs.onWrite != nil {
		f.fs.onWrite(f.File)
	}
	if f.fs.writeErr != nil {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, &fs.PathError{Op: "write", Path: f.Name(), Err: f.fs.writeErr}
	}
	return f.File.Write(p)
}

func (f *faultFile) Sync() error {
	if f.fs.syncErr != nil {
		return &fs.PathError{Op: "sync", Path: f.Name(), Err: f.fs.syncErr}
	}
	return f.File.Sync()
}

func (f *faultFile) Close() error {
	err := f.File.Close()
	if f.writing && f.fs.closeErr != nil && err == nil {
		return &fs.PathError{Op: "close", Path: f.Name(), Err: f.fs.closeErr}
	}
	return err
}

func (f *faultFile) Chmod(mode fs.FileMode) error {
	if f.fs.chmodErr != nil {
		return &fs.PathError{Op: "chmod", Path: f.Name(), Err: f.fs.chmodErr}
	}
	return f.File.Chmod(mode)
}

func (f *faultFile) Chown(uid, gid int) error {
	if f.fs.chownErr != nil && (!f.fs.chownOwnerOnly || uid != -1) {
		return &fs.PathError{Op: "chown", Path: f.Name(), Err: f.fs.chownErr}
	}
	return f.File.Chown(uid, gid)
}

func (f *faultFile) Truncate(size int64) error {
	if f.fs.truncateErr != nil {
		return &fs.PathError{Op: "truncate", Path: f.Name(), Err: f.fs.truncateErr}
	}
	return f.File.Truncate(size)
}

// readFile and writeFile are testenv's, by the names these tests use.
var (
	readFile  = testenv.ReadFile
	writeFile = testenv.WriteFile
)

func setTo(s string) func([]byte) ([]byte, error) {
	return func([]byte) ([]byte, error) { return []byte(s), nil }
}

// tempFiles lists the temp files createTemp made beside target.
func tempFiles(t testing.TB, target string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(filepath.Dir(target), tempPrefix(target)+"*"+tempSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// snapshot is what a refused or failed update must leave as it was: the
// file's content and the file itself (its inode).
type snapshot struct {
	path    string
	content string
	info    fs.FileInfo
}

func snap(t testing.TB, path string) snapshot {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return snapshot{path, readFile(t, path), fi}
}

// unchanged fails t if the file is not the one snap saw, with the same
// content and mode, or if a temp file was left beside it. (On Windows
// os.SameFile looks the path up again, so there only the content and
// mode tell.)
func (s snapshot) unchanged(t testing.TB) {
	t.Helper()
	fi, err := os.Stat(s.path)
	if err != nil {
		t.Fatalf("after the failure: %v", err)
	}
	if got := readFile(t, s.path); got != s.content || !os.SameFile(fi, s.info) || fi.Mode() != s.info.Mode() {
		t.Errorf("the file changed: %d bytes (was %d), same file %v, mode %v (was %v)",
			len(got), len(s.content), os.SameFile(fi, s.info), fi.Mode(), s.info.Mode())
	}
	if tmp := tempFiles(t, s.path); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}
}

// notExist fails t if path exists.
func notExist(t testing.TB, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s exists: %v", filepath.Base(path), err)
	}
}
