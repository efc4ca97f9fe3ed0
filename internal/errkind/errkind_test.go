//go:build unix

package errkind

import (
	"context"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/hold-dev/hold"
)

// TestOf checks that Of reports every kind an error is of, so that each
// table can apply its own order to an error of several kinds.
func TestOf(t *testing.T) {
	for _, c := range []struct {
		err  error
		want Kinds
	}{
		{nil, 0},
		{fmt.Errorf("plain"), 0},
		{Usagef("bad %s", "flag"), Usage},
		{hold.ErrInvalidName, Usage},
		{hold.ErrInvalidOption, Usage},
		{&ExecError{Cmd: "x", Err: fs.ErrNotExist}, Exec | NotExist},
		{&SignalError{Sig: syscall.SIGTERM, Err: context.Canceled}, Signal | Canceled},
		{fmt.Errorf("%w: %w", hold.ErrLost, &fs.PathError{Op: "stat", Path: "p", Err: syscall.ENOENT}), Lost | NotExist | Errno},
		{syscall.EROFS, ReadOnly | Errno},
		{syscall.ENOSPC, Full | Errno},
		{syscall.EISDIR, IsDir | Errno},
		{hold.ErrReleased, Lost},
		{hold.ErrTimeout, Timeout},
	} {
		if got := Of(c.err); got != c.want {
			t.Errorf("Of(%v) = %b, want %b", c.err, got, c.want)
		}
	}
}

func TestSignalErrorMessage(t *testing.T) {
	e := &SignalError{Sig: syscall.SIGTERM, Err: fmt.Errorf("data left unchanged")}
	if got, want := e.Error(), "interrupted by SIGTERM: data left unchanged"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
