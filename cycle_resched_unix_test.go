//go:build unix

package hold_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/resched"
)

// A kernel lock's wait passes the process's scheduler gate before it
// blocks (flock's waitLock): a process that hands a lock around with
// others waits now and then and otherwise takes free locks, and without
// the pass it never went through the Go scheduler, which cost 8 and 30
// such processes a fifth of their hand-offs (docs/bench.md). Each wait
// here comes more than 5 ms after the last pass, so each must pass.
func TestKernelWaitPassesScheduler(t *testing.T) {
	target := filepath.Join(t.TempDir(), "t")
	l, err := hold.Acquire(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	path := l.Path()
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	holder, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(holder)
	for range 3 {
		if err := unix.Flock(holder, unix.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		time.Sleep(6 * time.Millisecond) // the gate is due
		before := resched.Passes()
		go func() {
			time.Sleep(20 * time.Millisecond)
			unix.Flock(holder, unix.LOCK_UN)
		}()
		l, err := hold.Acquire(context.Background(), target)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
		if resched.Passes() == before {
			t.Fatal("a kernel lock's wait did not pass through the Go scheduler (internal/resched)")
		}
	}
}
