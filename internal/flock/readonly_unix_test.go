//go:build unix

package flock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/lock"
)

// accessMode returns how the descriptor of h's lock file is open
// (O_RDONLY or O_RDWR).
func accessMode(t *testing.T, h lock.Handle) int {
	t.Helper()
	fl, err := unix.FcntlInt(h.(*handle).File().Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fl & unix.O_ACCMODE
}

// Issue 29: where hold writes no record, it holds the file as flock(1)
// does, read-only, so that a script can lock itself and still be run;
// where it writes one (an empty file, its own record), read-write.
func TestOpensReadOnlyWhereNoRecord(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "s.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path     string
		explicit bool
		want     int
	}{
		{script, true, unix.O_RDONLY},
		{filepath.Join(dir, "empty.lock"), true, unix.O_RDWR},
		{filepath.Join(dir, "derived.lock"), false, unix.O_RDWR},
	} {
		for _, try := range []bool{false, true} {
			req := request(tc.path, false)
			req.Explicit = tc.explicit
			var h lock.Handle
			var err error
			if try {
				h, err = Protocol{}.TryAcquire(req)
			} else {
				h, err = Protocol{}.Acquire(t.Context(), req)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := accessMode(t, h); got != tc.want {
				t.Errorf("%s (explicit %v): descriptor open with access %d, want %d", tc.path, tc.explicit, got, tc.want)
			}
			if tc.path == script {
				// Holding it does not stop anyone from executing it.
				if err := unix.Access(script, unix.X_OK); err != nil {
					t.Fatal(err)
				}
				if lockWithoutRecordErr(tc.path) == nil {
					t.Errorf("%s: a second descriptor took the lock while it was held", tc.path)
				}
			}
			h.Release()
		}
	}
}

// lockWithoutRecordErr tries to take the lock at path on a fresh
// descriptor, as flock(1) would, and lets it go at once.
func lockWithoutRecordErr(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
}

// A directory named as the lock path is locked as flock(1) locks it; a
// derived path that is a directory, and a portable-protocol lock, are not.
func TestDirectoryLock(t *testing.T) {
	dir := t.TempDir()
	req := request(dir, false)
	req.Explicit = true
	h, err := Protocol{}.TryAcquire(req)
	if err != nil {
		t.Fatal(err)
	}
	if lockWithoutRecordErr(dir) == nil {
		t.Error("flock(2) on the directory succeeded while hold held it")
	}
	if !errors.Is(h.(*handle).TokenError(), lock.ErrForeign) {
		t.Errorf("token error %v, want one saying no record is written", h.(*handle).TokenError())
	}
	if _, err := (Protocol{}).TryAcquire(req); !errors.Is(err, lock.ErrBusy) {
		t.Errorf("second hold of the directory: %v, want busy", err)
	}
	h.Release()
	if err := lockWithoutRecordErr(dir); err != nil {
		t.Errorf("after release: %v", err)
	}

	derived := request(dir, false)
	if _, err := (Protocol{}).TryAcquire(derived); !errors.Is(err, lock.ErrNotRegular) {
		t.Errorf("derived path that is a directory: %v, want ErrNotRegular", err)
	}

	old := isPortableLock
	defer func() { isPortableLock = old }()
	isPortableLock = func(p string) bool { return p == dir }
	if _, err := (Protocol{}).TryAcquire(req); !errors.Is(err, lock.ErrNotRegular) {
		t.Errorf("portable lock directory: %v, want it refused", err)
	}
}
