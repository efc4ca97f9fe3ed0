package lockspec

import (
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/errkind"
)

// TestFileError checks that the front ends' own errors keep their kind
// (and so their exit status and reply code), and that any other error
// about the file becomes the library's *hold.Error.
func TestFileError(t *testing.T) {
	usage := errkind.Usagef("bad")
	exec := &errkind.ExecError{Cmd: "filter", Err: fs.ErrNotExist}
	for _, err := range []error{usage, exec} {
		if got := FileError("update", "f", err); got != err {
			t.Errorf("FileError(%v) = %#v, want it unchanged", err, got)
		}
	}
	got := FileError("update", "f", &fs.PathError{Op: "open", Path: "f", Err: os.ErrPermission})
	var he *hold.Error
	if !errors.As(got, &he) || he.Op != "update" || he.Path != "f" || he.Hint == "" || errkind.Of(got)&errkind.Permission == 0 {
		t.Errorf("got %#v, want a *hold.Error of update on f with a hint, of kind Permission", got)
	}
}
