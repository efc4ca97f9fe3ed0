package dirlock

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/lock"
)

// TestStopWithinTooLong: a holder that needs longer to stop than the stale
// time leaves is refused at once, with the setting to raise; one that
// leaves little room beats more often, so that three heartbeats fall
// before its own loss and one missed heartbeat alone never loses the lock.
func TestStopWithinTooLong(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.md.lock")
	p := New(Config{Stale: time.Second, Grace: 100 * time.Millisecond, Heartbeat: 400 * time.Millisecond})
	_, err := p.Acquire(context.Background(), &lock.Request{Path: path, StopWithin: 2 * time.Second})
	if !errors.Is(err, lock.ErrUnsupported) || !strings.Contains(err.Error(), EnvStale) {
		t.Fatalf("StopWithin longer than the stale time: %v, want ErrUnsupported naming %s", err, EnvStale)
	}
	c := p.Config()
	if hb := c.beatFor(c.Stale, 600*time.Millisecond); hb != 100*time.Millisecond {
		t.Errorf("heartbeat with 400ms left of the stale time: %v, want 100ms", hb)
	}
	if la := c.lossAfter(c.Stale, 600*time.Millisecond); la < 3*c.beatFor(c.Stale, 600*time.Millisecond) {
		t.Errorf("loss after %v, shorter than three heartbeats", la)
	}
	h, err := p.Acquire(context.Background(), &lock.Request{Path: path, StopWithin: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if hd := h.(*handle); hd.heartbeat != 100*time.Millisecond || hd.lossAfter != 300*time.Millisecond {
		t.Errorf("handle: heartbeat %v, loss after %v; want 100ms and 300ms", hd.heartbeat, hd.lossAfter)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
}
