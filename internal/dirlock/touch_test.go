package dirlock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hold-dev/hold/lock"
)

// TestHeartbeatAsked: a holder's own heartbeat (proper-lockfile's update)
// is used as asked, capped at half the stale time, and falls back to the
// configured one where its next beat would come after the holder's own
// loss deadline.
func TestHeartbeatAsked(t *testing.T) {
	c := Config{Stale: 10 * time.Second, Heartbeat: time.Second}.Resolve(func(string) string { return "" })
	for _, tc := range []struct{ asked, stale, stopWithin, want time.Duration }{
		{5 * time.Second, 10 * time.Second, 0, 5 * time.Second},
		{8 * time.Second, 10 * time.Second, 0, 5 * time.Second},                // capped at stale/2
		{2500 * time.Millisecond, 5 * time.Second, 0, 2500 * time.Millisecond}, // proper-lockfile's stale 5000, update 6000
		{time.Millisecond, 10 * time.Second, 0, minHeartbeat},
		{5 * time.Second, 10 * time.Second, 6 * time.Second, c.beatFor(10*time.Second, 6*time.Second)},
	} {
		if got := c.beatAsked(tc.asked, tc.stale, tc.stopWithin); got != tc.want {
			t.Errorf("beatAsked(%v, stale %v, stopWithin %v) = %v, want %v", tc.asked, tc.stale, tc.stopWithin, got, tc.want)
		}
		if got := c.beatAsked(tc.asked, tc.stale, tc.stopWithin); got >= c.lossAfter(tc.stale, tc.stopWithin) {
			t.Errorf("beatAsked(%v, stale %v) = %v, not before the loss deadline %v", tc.asked, tc.stale, got, c.lossAfter(tc.stale, tc.stopWithin))
		}
	}
	p := New(Config{Stale: 10 * time.Second, Heartbeat: time.Second})
	h, err := p.TryAcquire(&lock.Request{Path: filepath.Join(t.TempDir(), "x.lock"), Heartbeat: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if hb := h.(*handle).heartbeat; hb != 3*time.Second {
		t.Fatalf("handle's heartbeat %v, want the 3s asked", hb)
	}
}

// TestLostIfTouched: with LostIfTouched a heartbeat that finds the lock
// directory's time stamp set by someone else loses the lock; without it
// the same touch changes nothing (the directory is still ours), and the
// holder's own refreshes never count as someone else's.
func TestLostIfTouched(t *testing.T) {
	p := New(Config{Stale: 2 * time.Second, Grace: 100 * time.Millisecond, Heartbeat: 50 * time.Millisecond})
	dir := t.TempDir()
	strict, err := p.TryAcquire(&lock.Request{Path: filepath.Join(dir, "strict.lock"), LostIfTouched: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := p.TryAcquire(&lock.Request{Path: filepath.Join(dir, "plain.lock")})
	if err != nil {
		t.Fatal(err)
	}
	// Several of its own refreshes first: none of them is a loss.
	for hd := strict.(*handle); ; time.Sleep(10 * time.Millisecond) {
		hd.mu.Lock()
		n := hd.beats
		hd.mu.Unlock()
		if n >= 4 {
			break
		}
	}
	if err := strict.Check(); err != nil {
		t.Fatalf("after its own refreshes: %v", err)
	}
	past := time.Now().Add(-time.Minute)
	for _, path := range []string{filepath.Join(dir, "strict.lock"), filepath.Join(dir, "plain.lock")} {
		if err := os.Chtimes(path, past, past); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-strict.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("a touched lock under LostIfTouched is not lost 30s later")
	}
	if err := strict.Release(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Release of the touched lock: %v, want ErrLost", err)
	}
	// The plain holder beats on past the touch and keeps its lock.
	hd := plain.(*handle)
	hd.mu.Lock()
	from := hd.beats
	hd.mu.Unlock()
	for {
		hd.mu.Lock()
		n := hd.beats
		hd.mu.Unlock()
		if n >= from+3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := plain.Release(); err != nil {
		t.Fatalf("Release of a touched lock without LostIfTouched: %v", err)
	}
}
