package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/fairq"
	"github.com/hold-dev/hold/internal/proc"
)

// waitQueued polls until n fair waiters are queued for the lock at path.
func waitQueued(t *testing.T, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(hangLimit)
	for {
		if got, _ := fairq.Waiting(path); got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d fair waiters did not queue for %s within %v", n, path, hangLimit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestFairWaiterStoppedAtItsTurn: a fair waiter stopped with SIGSTOP
// (Ctrl-Z) while queued keeps its place when its turn comes. Others are
// told who it is, and a later fair waiter passes it over once the lock has
// stayed free for the stall bound, instead of waiting for as long as it
// stays stopped. Resumed, the stopped waiter gets the lock in its turn.
func TestFairWaiterStoppedAtItsTurn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lock := filepath.Join(dir, "T.lock")
	holder, _ := holdCommand(t, dir, "--fair")

	stopped, _ := startHold(t, dir, "run", "--fair", "T", "--", "touch", "b")
	// The holder left the queue when it took the lock: the one queued
	// is the waiter, at the front, asking for the lock.
	waitQueued(t, lock, 1)
	if err := stopped.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopped.Process.Signal(syscall.SIGCONT) })
	// A signal lands when the process next leaves the kernel: release
	// only once it has stopped, not while it may still be taking the lock.
	deadline := time.Now().Add(hangLimit)
	for !proc.Stopped(stopped.Process.Pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the waiter did not stop within %v", hangLimit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Let the holder finish: the lock is free, and it is the stopped
	// waiter's turn.
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if code := waitExit(t, holder); code != 0 {
		t.Fatalf("holder: exit %d", code)
	}

	pid := strconv.Itoa(stopped.Process.Pid)
	r := runHold(t, dir, "run", "--verbose", "--fair", "-n", "T", "--", "true")
	if r.code != exitConflict || !strings.Contains(r.stderr, "pid "+pid) || !strings.Contains(r.stderr, "stopped") {
		t.Errorf("a non-waiting fair attempt: exit %d, want %d naming the stopped waiter, pid %s: %s", r.code, exitConflict, pid, r.stderr)
	}

	start := time.Now()
	later := exec.Command(holdBin, "run", "--fair", "--verbose", "-w", "20", "T", "--", "touch", "c")
	later.Dir = dir
	later.Env = append(os.Environ(), "HOLD_DEBUG=1")
	out, err := later.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("a later fair waiter behind the stopped one: %v (after %v): %s", err, took.Round(time.Millisecond), out)
	}
	if _, err := os.Stat(filepath.Join(dir, "c")); err != nil {
		t.Fatalf("the later waiter's command did not run: %v", err)
	}
	if !strings.Contains(string(out), "passed over") || !strings.Contains(string(out), "pid="+pid) {
		t.Errorf("the later waiter's debug log does not name the waiter it passed over (pid %s):\n%s", pid, out)
	}
	// Its waiting notice (at 1s, with --verbose) names the stopped waiter.
	if !strings.Contains(string(out), "does not take it: pid "+pid) {
		t.Errorf("the later waiter's waiting notice does not name the stopped waiter (pid %s):\n%s", pid, out)
	}
	t.Logf("the later waiter took the lock %v after it asked", took.Round(time.Millisecond))

	// Resumed, the stopped waiter takes the lock in turn and runs.
	if err := stopped.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, stopped); code != 0 {
		t.Fatalf("the resumed waiter: exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(dir, "b")); err != nil {
		t.Fatalf("the resumed waiter's command did not run: %v", err)
	}
}
