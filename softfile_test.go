package hold_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/portable"
)

// SoftFile reaches the portable protocol: the lock is a plain file, in
// filelock's SoftFileLock format, with no fencing token, and the release
// removes it.
func TestSoftFileOption(t *testing.T) {
	target := t.TempDir() + string(os.PathSeparator) + "data"
	l, err := hold.TryAcquire(target, hold.WithProtocol(portable.New()), hold.SoftFile())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(target + ".lock")
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("lock path: %v, %v", fi, err)
	}
	if b, _ := os.ReadFile(target + ".lock"); !strings.HasPrefix(string(b), strconv.Itoa(os.Getpid())+"\n") {
		t.Fatalf("lock file holds %q", b)
	}
	if err := l.TokenError(); !errors.Is(err, hold.ErrNoToken) || !strings.Contains(err.Error(), "file form") {
		t.Fatalf("TokenError: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(target + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after release: %v", err)
	}
}
