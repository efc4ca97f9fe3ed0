//go:build unix

package guard_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/guard"
)

// TestRefusalAgreesWithUpdate checks that Refusal refuses what
// Update refuses before it locks, with the same error, and creates
// nothing: front ends call it to report these errors first.
func TestRefusalAgreesWithUpdate(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	for _, c := range []struct {
		name, path, lockFile string
		want                 error // nil: accepted
	}{
		{"missing file", filepath.Join(dir, "new"), "", nil},
		{"directory", sub, "", syscall.EISDIR},
		{"named pipe", fifo, "", hold.ErrFileNotRegular},
		{"lock file is the file", data, data, hold.ErrLockIsTarget},
	} {
		err := guard.Refusal("update", c.path, c.lockFile)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		var he *hold.Error
		if !errors.Is(err, c.want) || !errors.As(err, &he) || he.Op != "update" || he.Path != c.path {
			t.Errorf("%s: got %#v, want an *Error of update on %s matching %v", c.name, err, c.path, c.want)
		}
		var opts []hold.Option
		if c.lockFile != "" {
			opts = append(opts, hold.LockFile(c.lockFile))
		}
		uerr := hold.Update(context.Background(), c.path, func([]byte) ([]byte, error) { return []byte("x"), nil }, opts...)
		if uerr == nil || err.Error() != uerr.Error() {
			t.Errorf("%s: Refusal says %q, Update says %v", c.name, err, uerr)
		}
	}
	if _, err := os.Stat(sub + ".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a lock file was made beside the directory: %v", err)
	}
}

// TestLabel checks that Label labels a bare error with the
// operation, the path and a hint, and leaves an *Error as it is.
func TestLabel(t *testing.T) {
	err := guard.Label("append", "/x/data", &fs.PathError{Op: "open", Path: "/x/data", Err: syscall.ENOSPC})
	var he *hold.Error
	if !errors.As(err, &he) || he.Op != "append" || he.Path != "/x/data" || !strings.Contains(he.Hint, "disk is full") || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("got %#v", err)
	}
	lost := &hold.Error{Op: "check", Path: "/x/data.lock", Err: hold.ErrLost}
	if got := guard.Label("append", "/x/data", lost); got != error(lost) {
		t.Errorf("an *Error was changed: %#v", got)
	}
}
