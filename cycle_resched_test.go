package hold_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/resched"
)

// A loop of uncontended cycles makes nothing but system calls on its
// goroutine; unless it passes through the Go scheduler now and then, the
// runtime's monitor thread takes its processor away in them after 10 ms,
// again and again (internal/resched), which cost the cycle a tenth of its
// time (docs/bench.md). A process is let through once per 5 ms, looked
// for every 16 cycles when none of its last 1,024 waited, so a loop that
// lasts longer than that must have been let through.

// passCycles and passSpan are how long the loops below run at most
// without a pass before they fail: many times both bounds, so that the
// gate was due at one of their looks whatever passed it before.
const (
	passCycles = 5000
	passSpan   = 50 * time.Millisecond
)

func TestUncontendedCyclePassesScheduler(t *testing.T) {
	for _, c := range []struct {
		name  string
		cycle func(target string) error
	}{
		{"Acquire", func(target string) error {
			l, err := hold.Acquire(context.Background(), target)
			if err != nil {
				return err
			}
			return l.Release()
		}},
		{"TryAcquire", func(target string) error {
			l, err := hold.TryAcquire(target)
			if err != nil {
				return err
			}
			return l.Release()
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "t")
			before := resched.Passes()
			start := time.Now()
			n := 0
			for ; resched.Passes() == before && (n < passCycles || time.Since(start) < passSpan); n++ {
				if err := c.cycle(target); err != nil {
					t.Fatal(err)
				}
			}
			if resched.Passes() == before {
				t.Errorf("%d uncontended %s + Release cycles over %v never passed through the Go scheduler (internal/resched)", n, c.name, time.Since(start).Round(time.Millisecond))
			}
		})
	}
}
