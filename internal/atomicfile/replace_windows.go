package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"
	"unsafe"

	"golang.org/x/sys/windows"
)

// openFile is os.OpenFile, except that a file opened for reading only is
// opened with FILE_SHARE_DELETE too. Update keeps the original open while
// it renames the new content over it, and Windows refuses to replace a
// file that some handle has open without that share mode ("Access is
// denied"), this process's own handle included. Go's os.OpenFile never
// asks for it.
func openFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_APPEND|os.O_TRUNC) != 0 {
		return os.OpenFile(name, flag, perm)
	}
	p, err := windows.UTF16PtrFromString(name)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	h, err := windows.CreateFile(p, windows.GENERIC_READ,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_ATTRIBUTE_NORMAL, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(h), name), nil
}

// replaceWait bounds how long rename waits for other processes to close
// the file it replaces (see rename).
const replaceWait = 5 * time.Second

// rename puts the file at oldpath in newpath's place, atomically: a
// process that opens newpath gets either the old file or the new one,
// whole, never neither.
//
// Where the system offers it (Windows 10 1607 and later, on NTFS), the
// rename has POSIX semantics (FileRenameInfoEx with
// FILE_RENAME_FLAG_POSIX_SEMANTICS): the old file loses its name at
// once, and a reader that has it open (with FILE_SHARE_DELETE) goes on
// reading the old content until it closes it, as on Unix. Elsewhere
// (older systems, other file systems, wine) it is MoveFileEx with
// MOVEFILE_REPLACE_EXISTING, which cannot replace a file that anyone has
// open.
//
// Either way, a handle opened without FILE_SHARE_DELETE (the default of
// most Windows programs, Go's os.Open included) blocks the replacement
// while it is open: Windows then answers ERROR_ACCESS_DENIED or
// ERROR_SHARING_VIOLATION. Readers hold files open briefly, so rename
// retries for up to replaceWait, then returns an error that says a
// process has the file open. Nothing is lost meanwhile: the new content
// waits in its temp file and the old file stays whole.
func rename(oldpath, newpath string) error {
	deadline := time.Now().Add(replaceWait)
	pause := time.Millisecond
	for {
		err := replace(oldpath, newpath)
		if err == nil {
			return nil
		}
		if !errors.Is(err, windows.ERROR_ACCESS_DENIED) && !errors.Is(err, windows.ERROR_SHARING_VIOLATION) {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
		}
		if time.Now().After(deadline) {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: &openElsewhereError{err}}
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// openElsewhereError is a replacement that stayed refused for replaceWait.
type openElsewhereError struct{ err error }

func (e *openElsewhereError) Error() string {
	return e.err.Error() + " for " + replaceWait.String() + ": another process has the file open without FILE_SHARE_DELETE"
}

// hint is what Hint says instead of its advice for a permission error.
func (e *openElsewhereError) hint() string {
	return "close the program that has the file open (or make it share delete access), then retry; the file was left unchanged"
}

func (e *openElsewhereError) Unwrap() error { return e.err }

// replace is one attempt of rename: POSIX semantics, or MoveFileEx where
// the system or the file system does not offer them.
func replace(oldpath, newpath string) error {
	err := replacePOSIX(oldpath, newpath)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, windows.ERROR_INVALID_PARAMETER), // no FileRenameInfoEx, or no POSIX flag
		errors.Is(err, windows.ERROR_NOT_SUPPORTED),    // the file system has no POSIX semantics
		errors.Is(err, windows.ERROR_INVALID_FUNCTION): // STATUS_NOT_IMPLEMENTED (wine)
	default:
		return err
	}
	from, err := windows.UTF16PtrFromString(oldpath)
	if err != nil {
		return err
	}
	to, err := windows.UTF16PtrFromString(newpath)
	if err != nil {
		return err
	}
	return windows.MoveFileEx(from, to, windows.MOVEFILE_REPLACE_EXISTING|windows.MOVEFILE_WRITE_THROUGH)
}

// fileRenameInfo is FILE_RENAME_INFO with its Flags member (the
// FileRenameInfoEx form), followed in memory by the name.
type fileRenameInfo struct {
	Flags          uint32
	RootDirectory  windows.Handle
	FileNameLength uint32
	FileName       [1]uint16
}

func replacePOSIX(oldpath, newpath string) error {
	abs, err := filepath.Abs(newpath)
	if err != nil {
		return err
	}
	name, err := windows.UTF16FromString(abs)
	if err != nil {
		return err
	}
	from, err := windows.UTF16PtrFromString(oldpath)
	if err != nil {
		return err
	}
	h, err := windows.CreateFile(from, windows.DELETE|windows.SYNCHRONIZE,
		windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
	if err != nil {
		return err
	}
	defer windows.CloseHandle(h)
	var info fileRenameInfo
	size := int(unsafe.Offsetof(info.FileName)) + 2*len(name)
	buf := make([]uint64, (size+7)/8) // aligned for the struct
	ri := (*fileRenameInfo)(unsafe.Pointer(&buf[0]))
	ri.Flags = windows.FILE_RENAME_REPLACE_IF_EXISTS | windows.FILE_RENAME_POSIX_SEMANTICS
	ri.FileNameLength = uint32(2 * (len(name) - 1)) // bytes, without the NUL
	copy(unsafe.Slice(&ri.FileName[0], len(name)), name)
	return windows.SetFileInformationByHandle(h, windows.FileRenameInfoEx, (*byte)(unsafe.Pointer(ri)), uint32(size))
}
