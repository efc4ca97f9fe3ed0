//go:build unix

package flock

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/lock"
)

// TestUnsupportedFilesystem: the errors by which filesystems refuse
// flock(2) become ErrUnsupported with a hint that says what to do. (No
// filesystem here refuses locks, so the mapping is tested directly.)
func TestUnsupportedFilesystem(t *testing.T) {
	for _, errno := range []unix.Errno{unix.ENOLCK, unix.EOPNOTSUPP, unix.EINVAL, unix.ENOSYS} {
		err := lockError("/mnt/nfs/x.lock", errno)
		var e *lock.Error
		if !errors.Is(err, lock.ErrUnsupported) || !errors.Is(err, errno) || !errors.As(err, &e) || !strings.Contains(e.Hint, "local filesystem") {
			t.Errorf("%v: %v", errno, err)
		}
	}
	if err := lockError("x", unix.EIO); errors.Is(err, lock.ErrUnsupported) || !errors.Is(err, unix.EIO) {
		t.Errorf("EIO: %v", err)
	}
}
