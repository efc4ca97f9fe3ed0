//go:build unix

package agent

import (
	"context"
	"fmt"
	"io/fs"
	"syscall"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/errkind"
)

// TestErrorCode checks the reply codes of the errors docs/agent.md lists,
// including errors of two kinds, where the agent's order decides (it is
// not the exit status's: a lost lock whose file is gone is ELOST here and
// 66, cannot open, on the command line).
func TestErrorCode(t *testing.T) {
	gone := &fs.PathError{Op: "stat", Path: "t.lock", Err: syscall.ENOENT}
	for _, c := range []struct {
		err  error
		want string
	}{
		{errkind.Usagef("bad"), codeInvalid},
		{hold.ErrLockIsTarget, codeInvalid},
		{hold.ErrBusy, codeBusy},
		{hold.ErrTimeout, codeTimeout},
		{fmt.Errorf("%w: %w", hold.ErrLost, gone), codeLost},
		{hold.ErrReleased, codeLost},
		{context.Canceled, codeAbort},
		{&errkind.ExecError{Cmd: "hold-remote", Err: gone}, codeNoExec},
		{syscall.EROFS, codeReadOnly},
		{syscall.ENOSPC, codeFull},
		{hold.ErrNotRegular, codeNotRegular},
		{syscall.EISDIR, codeIsDir},
		{gone, codeNotFound},
		{syscall.EACCES, codeAccess},
		{hold.ErrUnsupported, codeUnsupported},
		{hold.ErrForeign, codeForeign},
		{fmt.Errorf("anything else"), codeIO},
	} {
		if got := errorCode(c.err); got != c.want {
			t.Errorf("errorCode(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}
