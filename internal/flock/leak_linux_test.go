package flock

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hold-dev/hold/lock"
)

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// TestNoDescriptorLeak: busy refusals, timed-out waits (once their
// holder lets go), Inspect, and every refused lock path close what they
// opened.
func TestNoDescriptorLeak(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.lock")
	if err := os.Mkdir(filepath.Join(dir, "d.lock"), 0o755); err != nil {
		t.Fatal(err)
	}
	var p Protocol
	before := 0
	for i := range 21 {
		if i == 1 {
			// Count after one round: the first lazily opens descriptors
			// that stay (the runtime's poller, opened by the first
			// os.Open, here that of /proc/locks). Give round 0's
			// abandoned wait a moment to close its descriptor.
			time.Sleep(20 * time.Millisecond)
			before = openFDs(t)
		}
		// Bounded wait: the last round's abandoned wait may be handing
		// the lock back just now.
		bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
		holder, err := p.Acquire(bctx, request(path, false))
		bcancel()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.TryAcquire(request(path, false)); err == nil {
			t.Fatal("not busy")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		if _, err := p.Acquire(ctx, request(path, true)); err == nil {
			t.Fatal("no timeout")
		}
		cancel()
		if _, err := p.Inspect(path); err != nil {
			t.Fatal(err)
		}
		if _, err := p.TryAcquire(request(filepath.Join(dir, "d.lock"), false)); err == nil {
			t.Fatal("locked a directory")
		}
		if _, err := p.TryAcquire(request(filepath.Join(dir, "missing", "x.lock"), false)); err == nil {
			t.Fatal("locked in a missing directory")
		}
		hf := holder.(lock.Filer)
		hf.File()
		holder.Release()
		freeSoon(t, path, 10*time.Second) // the abandoned wait has come and gone
	}
	// The abandoned waits close their descriptor just after they let go.
	deadline := time.Now().Add(10 * time.Second)
	for openFDs(t) > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors open before, %d after", before, openFDs(t))
		}
		time.Sleep(time.Millisecond)
	}
}
