package hold_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/fairq"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/proc"
)

func init() { hold.RegisterWorker("turn-wait", turnWaitWorker) }

// turnWaitWorker waits in the queue for TURN_TARGET: a fair plain lock,
// or a slot of a semaphore of TURN_SLOTS slots; it lets go at once.
func turnWaitWorker() int {
	opts := []hold.Option{hold.Fair()}
	if n, _ := strconv.Atoi(os.Getenv("TURN_SLOTS")); n > 1 {
		opts = []hold.Option{hold.Slots(n)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := hold.Acquire(ctx, os.Getenv("TURN_TARGET"), opts...)
	if err != nil {
		return 1
	}
	l.Release()
	return 0
}

// TestInspectNamesStoppedTurn: a free lock whose queue has at its front a
// waiter stopped at its turn (Ctrl-Z) says who in its status
// (Status.StoppedTurn), which the hold command's waiting message shows:
// for a fair lock through the fair protocol's Inspect, and for a kernel
// semaphore, whose waiters queue the same way, through hold.Inspect.
// lockspec learns it from there, not from the queue's package.
func TestInspectNamesStoppedTurn(t *testing.T) {
	for _, c := range []struct {
		name  string
		slots int
		opts  []hold.Option
	}{
		{"fair", 0, []hold.Option{hold.Fair()}},
		{"semaphore", 2, []hold.Option{hold.Slots(2)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "t")
			var held []*hold.Lock
			for range max(c.slots, 1) {
				l, err := hold.TryAcquire(target, c.opts...)
				if err != nil {
					t.Fatal(err)
				}
				held = append(held, l)
			}
			w := startCoreWorker(t, "turn-wait", "TURN_TARGET="+target, "TURN_SLOTS="+strconv.Itoa(c.slots))
			queue := target + ".lock"
			if c.slots > 1 {
				queue = flock.CountPath(queue) // a semaphore's waiters queue at its count file
			}
			deadline := time.Now().Add(30 * time.Second)
			for n, _ := fairq.Waiting(queue); n != 1; n, _ = fairq.Waiting(queue) {
				if time.Now().After(deadline) {
					t.Fatalf("the waiter did not queue; output:\n%s", w.out.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			pid := w.cmd.Process.Pid
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
			for !proc.Stopped(pid) {
				if time.Now().After(deadline) {
					t.Fatal("the waiter did not stop")
				}
				time.Sleep(10 * time.Millisecond)
			}
			inspect := []hold.Option{}
			if c.slots == 0 {
				inspect = c.opts
			}
			st, err := hold.Inspect(target, inspect...)
			if err != nil {
				t.Fatal(err)
			}
			if st.StoppedTurn != "" {
				t.Fatalf("a held lock names a stopped turn: %q", st.StoppedTurn)
			}
			for _, l := range held {
				l.Release()
			}
			st, err = hold.Inspect(target, inspect...)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != hold.Free || !strings.Contains(st.StoppedTurn, "pid "+strconv.Itoa(pid)) || !strings.Contains(st.StoppedTurn, "stopped") {
				t.Fatalf("free, with a stopped waiter at the front: state %v, StoppedTurn %q, want it to name pid %d, stopped", st.State, st.StoppedTurn, pid)
			}
			syscall.Kill(pid, syscall.SIGCONT)
			if err := w.wait(t, 30*time.Second); err != nil {
				t.Fatalf("the resumed waiter: %v; output:\n%s", err, w.out.String())
			}
		})
	}
}
