package dirlock

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Waiters of one Protocol share one inotify instance and one watch per
// directory; each hears only about its own lock path, and the instance is
// closed once nobody has waited for a while.
func TestSharedWatchWakesOnlyItsLock(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.lock"), filepath.Join(dir, "b.lock")
	for _, p := range []string{a, b} {
		if err := os.Mkdir(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	p := New(Config{})
	wa, wb := p.watchRemovals(a), p.watchRemovals(b)
	wa2 := p.watchRemovals(a)
	if wa == nil || wb == nil || wa2 == nil {
		t.Fatal("no inotify subscription")
	}
	p.watches.mu.Lock()
	ino, dirs := p.watches.ino, len(p.watches.ino.dirs)
	p.watches.mu.Unlock()
	if dirs != 1 {
		t.Fatalf("%d watches for one directory", dirs)
	}
	// Noise that must not wake anyone: a file created, written and
	// renamed into the directory, and the locks' heartbeats.
	os.WriteFile(filepath.Join(dir, "counter"), []byte("1"), 0o644)
	os.Rename(filepath.Join(dir, "counter"), filepath.Join(dir, "counter2"))
	os.Chtimes(a, time.Now(), time.Now())
	if err := os.Rename(a, a+".rm-test"); err != nil {
		t.Fatal(err)
	}
	for _, w := range []removals{wa, wa2} {
		select {
		case <-w.C():
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter on a.lock was not woken by its removal")
		}
	}
	// Give any stray event time to arrive before asserting silence.
	time.Sleep(100 * time.Millisecond)
	select {
	case <-wb.C():
		t.Fatal("the waiter on b.lock was woken by other entries' events")
	default:
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wb.C():
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter on b.lock was not woken by its removal")
	}
	watched := func() int {
		p.watches.mu.Lock()
		defer p.watches.mu.Unlock()
		return len(ino.dirs)
	}
	for i, w := range []removals{wa, wb, wa2} {
		w.close()
		w.close() // idempotent
		// The directory's watch lasts while anyone waits in it, and not a
		// moment longer: an idle watch would still wake this process for
		// every release in the directory.
		if want := map[bool]int{true: 0, false: 1}[i == 2]; watched() != want {
			t.Fatalf("after %d of 3 waiters left: %d watches, want %d", i+1, watched(), want)
		}
	}
	deadline := time.Now().Add(hubIdle + 10*time.Second)
	for {
		p.watches.mu.Lock()
		closed := ino.closed && p.watches.ino == nil
		p.watches.mu.Unlock()
		if closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the idle inotify instance was not closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A new waiter gets a new instance.
	w := p.watchRemovals(filepath.Join(dir, "c.lock"))
	if w == nil {
		t.Fatal("no subscription after the idle close")
	}
	w.close()
}
