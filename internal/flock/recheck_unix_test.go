//go:build unix

package flock

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRenamedBeforeLockIsTakenAgain: a lock file renamed over or removed
// between the open and the lock (an update of a file that is its own lock
// does that under the lock, which it may release in that instant) is not
// the lock: the acquisition starts again on the file the path names now.
// The file was verified before (an earlier acquisition), as in a loop on
// one lock, so the check is the one that costs no system call of its own
// unless the file changed; the hard link case is a file that keeps one
// link after the rename, elsewhere.
func TestRenamedBeforeLockIsTakenAgain(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.lock")
	var p Protocol
	for _, damage := range []struct {
		name string
		do   func() error
	}{
		{"renamed over", func() error { return renameNewOver(path) }},
		{"removed", func() error { return os.Remove(path) }},
		{"hard-linked, then renamed over", func() error {
			if err := os.Link(path, filepath.Join(dir, "other-name")); err != nil {
				return err
			}
			return renameNewOver(path)
		}},
	} {
		os.Remove(filepath.Join(dir, "other-name"))
		// Twice, so that the file is in the verified cache and the
		// second acquisition is the cheap one.
		for range 2 {
			h, err := p.TryAcquire(request(path, false))
			if err != nil {
				t.Fatal(err)
			}
			h.Release()
		}
		req := request(path, false)
		f, writable, err := openLockFile(path, openMode{})
		if err != nil {
			t.Fatal(err)
		}
		if err := damage.do(); err != nil {
			t.Fatal(err)
		}
		h, _, err := p.lockOpened(context.Background(), req, f, writable, false, false)
		if err != nil {
			t.Fatalf("%s: %v", damage.name, err)
		}
		if same, err := h.f.namedBy(path); err != nil || !same {
			t.Errorf("%s between the open and the lock: the lock is on a file the path no longer names (%v)", damage.name, err)
		}
		h.Release()
	}
}

// TestWaiterGrantedRenamedFileTakesItAgain: a waiter blocked on a lock
// file that is renamed over while another process holds it is granted,
// once that holder lets go, a lock on a file nobody else opens any more;
// it takes the new file's lock instead, and holds the file the path
// names. The holder writes nothing into the file (as flock(1)), so that
// what the waiter saw of it before the wait is what it had verified.
func TestWaiterGrantedRenamedFileTakesItAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	var p Protocol
	// Verified in this process first, as in a loop on one lock.
	for range 2 {
		h, err := p.TryAcquire(request(path, false))
		if err != nil {
			t.Fatal(err)
		}
		h.Release()
	}
	w := startWorker(t, "rawholder", path)
	w.expect(t, "held")
	type result struct {
		h   *handle
		err error
	}
	got := make(chan result, 1)
	go func() {
		h, err := p.Acquire(context.Background(), request(path, false))
		hh, _ := h.(*handle)
		got <- result{hh, err}
	}()
	waitBlocked(t, path)
	if err := renameNewOver(path); err != nil {
		t.Fatal(err)
	}
	w.stdin.Close() // the holder releases the file it held
	var r result
	select {
	case r = <-got:
	case <-time.After(time.Minute):
		t.Fatal("the waiter was not granted a lock within a minute")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.h.Release()
	if same, err := r.h.f.namedBy(path); err != nil || !same {
		t.Errorf("the waiter holds the file that was renamed over, which the path no longer names (%v)", err)
	}
}

// renameNewOver renames a new, empty file over path.
func renameNewOver(path string) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, nil, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// waitBlocked returns once this process waits for a flock lock on the file
// at path, as the kernel's lock table shows (Linux); elsewhere it gives
// the waiter a moment, which only makes the test's case likelier.
func waitBlocked(t *testing.T, path string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		time.Sleep(100 * time.Millisecond)
		return
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	ino := strconv.FormatUint(st.Sys().(*syscall.Stat_t).Ino, 10)
	pid := strconv.Itoa(os.Getpid())
	deadline := time.Now().Add(time.Minute)
	for {
		if blockedIn(pid, ino) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter did not block within a minute")
		}
		time.Sleep(time.Millisecond)
	}
}

// blockedIn reports whether /proc/locks lists a flock that pid waits for
// on inode ino ("N: -> FLOCK  ADVISORY  WRITE PID MAJ:MIN:INODE ...").
func blockedIn(pid, ino string) bool {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 7 || fields[1] != "->" || fields[2] != "FLOCK" {
			continue
		}
		if dev := strings.Split(fields[6], ":"); fields[5] == pid && len(dev) == 3 && dev[2] == ino {
			return true
		}
	}
	return false
}
