//go:build unix

package fairq

import (
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/proc"
)

// TestStoppedWaiterIsPassedOver: a fair waiter stopped (SIGSTOP) at the
// front of the queue, with the lock free, stalls the waiters behind it for
// no longer than the stall bound; once resumed it still gets the lock. On
// Linux, HeadWaiter names it while it is stopped.
func TestStoppedWaiterIsPassedOver(t *testing.T) { forDesigns(t, testStoppedWaiterIsPassedOver) }

func testStoppedWaiterIsPassedOver(t *testing.T, design string) {
	path := lockPath(t)
	out := filepath.Join(filepath.Dir(path), "order")
	main := holdMain(t, path)
	stopped := worker(t, "waiter", lockEnv+"="+path, idEnv+"=0", outEnv+"="+out, designEnv+"="+design)
	// Queued, and done joining: a waiter stopped between locking its slot
	// and letting go of the counter would keep every newcomer from joining,
	// which is not what this test is about.
	waitFor(t, "the waiter is queued", func() bool {
		return len(queued(t, design, path)) == 1 && counterFree(t, design, path)
	})
	if err := stopped.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopped.Process.Signal(syscall.SIGCONT) })
	// Release only once it has stopped: a signal lands when the process
	// next leaves the kernel, and a waiter that got there by taking the
	// lock would be stopped holding it.
	waitFor(t, "the waiter has stopped", func() bool { return isStopped(t, stopped.Process.Pid) })
	if err := main.Release(); err != nil {
		t.Fatal(err)
	}
	if design == ofdDesign {
		w, ok := HeadWaiter(path)
		if !ok || w.PID != stopped.Process.Pid || !w.Stopped {
			t.Errorf("HeadWaiter = %+v, %v; want pid %d, stopped", w, ok, stopped.Process.Pid)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*StallBound)
	defer cancel()
	start := time.Now()
	h, err := newProtocol(design).Acquire(ctx, request(path))
	if err != nil {
		t.Fatalf("a waiter behind the stopped one: %v", err)
	}
	took := time.Since(start)
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if took < StallBound {
		// Passing over a waiter whose lock was not free for the whole
		// bound would be wrong, whatever the load.
		t.Errorf("passed over the stopped waiter after %v, before the stall bound %v", took, StallBound)
	}
	if err := stopped.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := stopped.Wait(); err != nil {
		t.Fatalf("the resumed waiter: %v", err)
	}
	if got := queued(t, design, path); len(got) != 0 {
		t.Errorf("tickets left: %v", got)
	}
}

// isStopped reports whether process pid is stopped: /proc on Linux, ps(1)
// elsewhere.
func isStopped(t *testing.T, pid int) bool {
	if runtime.GOOS == "linux" {
		return proc.Stopped(pid)
	}
	out, err := exec.Command("ps", "-o", "stat=", "-p", strconv.Itoa(pid)).Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.HasPrefix(strings.TrimSpace(string(out)), "T")
}

// TestHeadWaiterNobodyQueued checks that HeadWaiter finds no waiter where
// there is no queue, and how a waiter is described in messages.
func TestHeadWaiterNobodyQueued(t *testing.T) {
	if w, ok := HeadWaiter(filepath.Join(t.TempDir(), "t.lock")); ok {
		t.Errorf("HeadWaiter found %v without a queue", w)
	}
	w := Waiter{PID: 4242, Command: "make", Stopped: true}
	if got, want := w.String(), "pid 4242 (make), stopped"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
