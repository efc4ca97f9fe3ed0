package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/atomicfile"
)

// Exit statuses. 1 is flock(1)'s "busy or timed out"; the rest are the BSD
// sysexits codes DESIGN and the README list, so scripts can tell a lock
// that is merely busy from a lock that could not be used at all.
const (
	exitConflict     = 1  // the lock is held (-n) or the wait timed out (-w); -E changes it
	exitUsage        = 64 // EX_USAGE: bad flags or arguments
	exitLockError    = 65 // EX_DATAERR: the lock could not be used (unsupported filesystem, lost, ...)
	exitCannotOpen   = 66 // EX_NOINPUT: the lock file cannot be opened or is not hold's (missing directory, not a regular file, data at the lock path, no permission)
	exitExecFailed   = 69 // EX_UNAVAILABLE: the command could not be started
	exitOSError      = 71 // EX_OSERR: another operating-system error
	exitCannotCreate = 73 // EX_CANTCREAT: read-only or full filesystem
	exitSignalBase   = 128
)

// exitCodeHelp is the exit status table printed by `hold help`.
const exitCodeHelp = `
Exit status:
  0..255  the command's own status (hold run); 128+N if it was killed by signal N
  1       the lock is busy (-n) or the wait timed out (-w); set another with -E N
  64      usage error: bad flag or argument
  65      the lock could not be used (unsupported filesystem, lost lock, clock skew)
  66      the lock path, or the file update or append changes, cannot be used:
          missing directory, not a regular file, no permission, or something
          hold did not create (data, another tool's file)
  69      the command could not be started
  71      other operating-system error
  73      read-only or full filesystem
  128+N   interrupted by signal N while waiting
`

// usageError is bad input on the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef returns a usage error (exit 64).
func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// execError is a command that could not be started (exit 69).
type execError struct {
	cmd string
	err error
}

func (e *execError) Error() string { return fmt.Sprintf("cannot run %s: %v", e.cmd, e.err) }
func (e *execError) Unwrap() error { return e.err }

// signalError ends a wait that a signal interrupted (exit 128+signal).
type signalError struct {
	sig os.Signal
	err error // the error of the interrupted operation, if any
}

func (e *signalError) Error() string {
	if e.err != nil {
		return fmt.Sprintf("interrupted by %v: %v", signalName(e.sig), e.err)
	}
	return fmt.Sprintf("interrupted by %v", signalName(e.sig))
}

func (e *signalError) Unwrap() error { return e.err }

// exitCode is the one mapping from an error to hold's exit status.
// conflict is the status for busy and timed out (1 unless -E).
func exitCode(err error, conflict int) int {
	var (
		usage *usageError
		exec  *execError
		sig   *signalError
	)
	switch {
	case err == nil:
		return 0
	case errors.As(err, &sig):
		if n, ok := sig.sig.(syscall.Signal); ok {
			return exitSignalBase + int(n)
		}
		return exitSignalBase + 2
	case errors.As(err, &usage), errors.Is(err, hold.ErrInvalidName), errors.Is(err, hold.ErrLockIsTarget):
		return exitUsage
	case errors.Is(err, hold.ErrBusy), errors.Is(err, hold.ErrTimeout):
		return conflict
	case errors.As(err, &exec):
		return exitExecFailed
	case isFilesystemFull(err):
		return exitCannotCreate
	case errors.Is(err, hold.ErrNotRegular), errors.Is(err, hold.ErrForeign), errors.Is(err, os.ErrNotExist), errors.Is(err, os.ErrPermission),
		// hold update and append: a target that is not a regular file (a
		// directory, a FIFO, a device, a socket) is one case, with one
		// status, whichever check found it.
		errors.Is(err, atomicfile.ErrNotRegular), errors.Is(err, syscall.EISDIR):
		return exitCannotOpen
	case errors.Is(err, hold.ErrUnsupported), errors.Is(err, hold.ErrLost), errors.Is(err, hold.ErrReleased):
		return exitLockError
	case errors.Is(err, context.Canceled):
		return exitSignalBase + 2
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return exitOSError
	}
	return exitLockError
}

// isFilesystemFull reports a read-only or full filesystem.
func isFilesystemFull(err error) bool {
	return errors.Is(err, syscall.EROFS) || errors.Is(err, syscall.ENOSPC) ||
		errors.Is(err, syscall.EDQUOT) || isFilesystemFullOS(err)
}

// fail reports err on stderr as "hold CMD: ..." and returns its exit
// status. Messages from hold's errors already name the lock path, the
// holder and a hint.
func fail(cmd string, err error, conflict int) int {
	code := exitCode(err, conflict)
	fmt.Fprintf(os.Stderr, "hold %s: %v\n", cmd, err)
	if code == exitUsage {
		var usage *usageError
		if errors.As(err, &usage) {
			fmt.Fprintf(os.Stderr, "Run 'hold %s --help' for usage.\n", cmd)
		}
	}
	return code
}
