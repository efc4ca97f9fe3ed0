package flock

import (
	"path/filepath"
	"testing"
	"time"
)

// TestLazyTimerLooksEveryLazyTick: a process that takes a kernel lock
// again and again has a hold listed in lazy nearly all the time, so the
// lazy records' timer runs all the time, and what it costs is how often it
// looks (each look wakes a thread of the runtime; see lazyTick). A timer
// never runs before it is due, so over any span the looks are at most one
// a lazyTick, and one more for a look under way when the span began: that
// count is what is asserted, which a load on the machine can only make
// smaller. Looking every recordDelay, as before, made about five times as
// many.
func TestLazyTimerLooksEveryLazyTick(t *testing.T) {
	if !kernelNamesHolders {
		t.Skip("records are written at once where the kernel cannot name a lock's holders (kernelNamesHolders): no lazy timer runs")
	}
	path := filepath.Join(t.TempDir(), "t.lock")
	var p Protocol
	cycle := func(hold time.Duration) {
		h, err := p.TryAcquire(request(path, false))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(hold)
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
	}
	cycle(0) // a process's first exclusive hold writes its record at once
	if hd := lazy.warm(); !hd {
		t.Fatal("lazy not warm after an exclusive hold")
	}
	const span = 12 * lazyTick
	before := lazy.ticks.Load()
	start := time.Now()
	for time.Since(start) < span {
		// Holds shorter than recordDelay, listed most of the time.
		cycle(recordDelay / 10)
	}
	elapsed := time.Since(start)
	looks := lazy.ticks.Load() - before
	if limit := uint64(elapsed/lazyTick) + 1; looks > limit {
		t.Errorf("the lazy records' timer looked %d times in %v of holds, more than once a lazyTick (%v): at most %d", looks, elapsed.Round(time.Millisecond), lazyTick, limit)
	}
	if looks == 0 {
		t.Errorf("the lazy records' timer never looked in %v of holds", elapsed.Round(time.Millisecond))
	}
}
