package lockspec

import (
	"errors"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/atomicfile"
	"github.com/hold-dev/hold/internal/errkind"
)

// CheckGuarded refuses, before any lock is taken or created, what an
// update or append of file can never do: lock the file itself (lockFile),
// or write a file that cannot be one (a directory). The command line and
// the agent both ask it, before they resolve the request.
func CheckGuarded(op, file, lockFile string) error {
	if err := atomicfile.CheckLockFile(op, file, lockFile); err != nil {
		return err
	}
	if _, err := atomicfile.Locate(atomicfile.OS{}, file); err != nil {
		return FileError(op, file, err)
	}
	return nil
}

// FileError labels an error about FILE the way the library does.
func FileError(op, file string, err error) error {
	var he *hold.Error
	var usage *errkind.UsageError
	var exec *errkind.ExecError
	if errors.As(err, &he) || errors.As(err, &usage) || errors.As(err, &exec) {
		return err
	}
	return &hold.Error{Op: op, Path: file, Err: err, Hint: atomicfile.Hint(err)}
}
