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
// time (docs/bench.md). The gate lets a process through once per 5 ms, so
// a loop that lasts longer than that must have been let through.

// passSpan is how long the loops below run at least: several times the
// gate's 5 ms, so that one of their cycles finds it due whatever passed it
// before.
const passSpan = 30 * time.Millisecond

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
			for ; n < 100 || time.Since(start) < passSpan; n++ {
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
