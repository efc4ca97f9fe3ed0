//go:build unix

package hold_test

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
)

// TestCheckGuardedAgreesWithUpdate checks that CheckGuarded refuses what
// Update refuses before it locks, with the same error, and creates
// nothing: front ends call it to report these errors first.
func TestCheckGuardedAgreesWithUpdate(t *testing.T) {
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
		err := hold.CheckGuarded("update", c.path, c.lockFile)
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
			t.Errorf("%s: CheckGuarded says %q, Update says %v", c.name, err, uerr)
		}
	}
	if _, err := os.Stat(sub + ".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a lock file was made beside the directory: %v", err)
	}
}

// TestFileError checks that FileError labels a bare error with the
// operation, the path and a hint, and leaves an *Error as it is.
func TestFileError(t *testing.T) {
	err := hold.FileError("append", "/x/data", &fs.PathError{Op: "open", Path: "/x/data", Err: syscall.ENOSPC})
	var he *hold.Error
	if !errors.As(err, &he) || he.Op != "append" || he.Path != "/x/data" || !strings.Contains(he.Hint, "disk is full") || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("got %#v", err)
	}
	lost := &hold.Error{Op: "check", Path: "/x/data.lock", Err: hold.ErrLost}
	if got := hold.FileError("append", "/x/data", lost); got != error(lost) {
		t.Errorf("an *Error was changed: %#v", got)
	}
}

// TestDefaultProtocol checks that DefaultProtocol is the protocol Acquire
// takes a lock with when none is named.
func TestDefaultProtocol(t *testing.T) {
	target := filepath.Join(t.TempDir(), "t")
	l, err := hold.Acquire(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if got, want := l.Protocol(), hold.DefaultProtocol().Name(); got != want || want != "flock" {
		t.Errorf("Acquire took a %q lock; DefaultProtocol is %q", got, want)
	}
}

// TestFairTurnNobodyQueued checks that FairTurn finds no waiter where
// there is no queue, and how a waiter is described.
func TestFairTurnNobodyQueued(t *testing.T) {
	if w, ok := hold.FairTurn(filepath.Join(t.TempDir(), "t.lock")); ok {
		t.Errorf("FairTurn found %v without a queue", w)
	}
	w := hold.FairWaiter{PID: 4242, Command: "make", Stopped: true}
	if got, want := w.String(), "pid 4242 (make), stopped"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
