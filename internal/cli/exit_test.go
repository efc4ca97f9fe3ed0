//go:build unix

package cli

import (
	"context"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/atomicfile"
	"github.com/hold-dev/hold/internal/errkind"
)

// TestExitCode checks the exit status of each kind of error, including
// errors of two kinds, where the command line's order decides.
func TestExitCode(t *testing.T) {
	gone := &fs.PathError{Op: "stat", Path: "t.lock", Err: syscall.ENOENT}
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{&errkind.SignalError{Sig: syscall.SIGTERM, Err: hold.ErrBusy}, exitSignalBase + int(syscall.SIGTERM)},
		{errkind.Usagef("bad"), exitUsage},
		{hold.ErrInvalidName, exitUsage},
		{hold.ErrBusy, 7},
		{hold.ErrTimeout, 7},
		{&errkind.ExecError{Cmd: "x", Err: gone}, exitExecFailed},
		{syscall.EROFS, exitCannotCreate},
		{syscall.EDQUOT, exitCannotCreate},
		{fmt.Errorf("%w: %w", hold.ErrLost, gone), exitCannotOpen},
		{atomicfile.ErrNotRegular, exitCannotOpen},
		{hold.ErrForeign, exitCannotOpen},
		{hold.ErrLost, exitLockError},
		{&hold.Error{Op: "run", Path: "t.lock", Err: hold.ErrLost}, exitLockError},
		// A waiter whose place in line went away gave up; it held nothing.
		{&hold.Error{Op: "acquire", Path: "t.lock", Err: hold.ErrLost, Hint: "this waiter's lease expired while it waited"}, 7},
		{context.Canceled, exitSignalBase + 2},
		{syscall.EIO, exitOSError},
		{fmt.Errorf("anything else"), exitLockError},
	} {
		if got := exitCode(c.err, 7); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
