package hold

import (
	"errors"

	"github.com/hold-dev/hold/internal/atomicfile"
)

// ErrFileNotRegular is the cause of an Update or Append error about a file
// that is not a regular file (a device, a socket, a named pipe): it cannot
// be replaced or appended to atomically, so it is refused before anything
// is locked. (A lock path that is not a regular file is ErrNotRegular.)
var ErrFileNotRegular = atomicfile.ErrNotRegular

// CheckGuarded returns the error that Update or Append (op "update" or
// "append") would return at once for path, before anything is locked or
// created, or nil: a lock file that is path itself (ErrLockIsTarget;
// lockFile is the LockFile option's path, or ""), or a path that cannot be
// a file they write (a directory, ErrFileNotRegular, a file whose
// permission bits let nobody write it, a NUL byte). A missing file passes:
// Update and Append create it. They make the same checks themselves; a
// program that checks requests of its own before it calls them (hold's
// command line and agent do) calls CheckGuarded first, so that these
// errors come before its own.
func CheckGuarded(op, path, lockFile string) error {
	if err := atomicfile.CheckLockFile(op, path, lockFile); err != nil {
		return err
	}
	if _, err := atomicfile.Locate(atomicfile.OS{}, path); err != nil {
		return FileError(op, path, err)
	}
	return nil
}

// FileError returns err, met by operation op on the file at path, as
// Update and Append report an error about their file: an *Error with op,
// path and a hint that says what to do (make the file writable, free some
// disk). An err that is already an *Error is returned as it is. It is for
// programs that write a file under a hold lock with code of their own.
func FileError(op, path string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Op: op, Path: path, Err: err, Hint: atomicfile.Hint(err)}
}
