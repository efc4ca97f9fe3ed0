package portable_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/lock"
	"github.com/hold-dev/hold/portable"
)

// The portable protocol through hold's front door (Do, Update, Acquire),
// and its options reaching the protocol. The rules of the lock itself are
// tested in internal/dirlock; what every protocol must do, by the
// conformance suite.

func TestPortableDoRunsUnderADirectoryLock(t *testing.T) {
	target := filepath.Join(t.TempDir(), "data.md")
	dir := portable.New()
	err := hold.Do(context.Background(), target, func(ctx context.Context) error {
		fi, err := os.Stat(target + ".lock")
		if err != nil || !fi.IsDir() {
			t.Errorf("no lock directory while fn runs: %v", err)
		}
		if _, err := os.Stat(filepath.Join(target+".lock", "owner.json")); err != nil {
			t.Errorf("no owner record: %v", err)
		}
		// Another holder is refused meanwhile.
		if _, err := hold.TryAcquire(target, hold.WithProtocol(portable.New())); !errors.Is(err, hold.ErrBusy) {
			t.Errorf("second holder: %v", err)
		}
		return nil
	}, hold.WithProtocol(dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(target + ".lock"); !os.IsNotExist(err) {
		t.Fatalf("lock directory left after Do: %v", err)
	}
}

// A lock removed under fn: fn's context is cancelled (by the heartbeat's
// lost signal) and Do reports ErrLost.
func TestPortableDoCancelsFnWhenLost(t *testing.T) {
	target := filepath.Join(t.TempDir(), "data.md")
	dir := portable.New(portable.Heartbeat(50 * time.Millisecond))
	err := hold.Do(context.Background(), target, func(ctx context.Context) error {
		os.RemoveAll(target + ".lock")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(30 * time.Second):
			t.Error("fn's context was not cancelled after the lock was lost")
			return nil
		}
	}, hold.WithProtocol(dir))
	if !errors.Is(err, hold.ErrLost) {
		t.Fatalf("Do after a lost lock: %v", err)
	}
}

// Update does not publish when the lock was lost during fn, even before a
// heartbeat noticed: Check looks at the lock itself.
func TestPortableUpdateRefusesAfterLost(t *testing.T) {
	target := filepath.Join(t.TempDir(), "data.md")
	os.WriteFile(target, []byte("old"), 0o644)
	dir := portable.New(portable.Heartbeat(time.Hour / 2))
	err := hold.Update(context.Background(), target, func(old []byte) ([]byte, error) {
		os.RemoveAll(target + ".lock")
		return []byte("new"), nil
	}, hold.WithProtocol(dir))
	if !errors.Is(err, hold.ErrLost) {
		t.Fatalf("Update after a lost lock: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != "old" {
		t.Fatalf("Update published %q after losing its lock", b)
	}
}

// hang bounds the waits below: long enough never to end one that works,
// short enough to end one that hangs.
const hang = time.Minute

// heldBy takes the lock on target through p and releases it at the end of
// the test.
func heldBy(t *testing.T, p *portable.Protocol, target string) *hold.Lock {
	t.Helper()
	l, err := hold.TryAcquire(target, hold.WithProtocol(p))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Release() })
	return l
}

// Patience ends a wait on a lock that stays with one holder, with
// ErrTimeout naming that bound; without it only ctx would end the wait.
func TestPatienceEndsWaitOnOneHolder(t *testing.T) {
	target := filepath.Join(t.TempDir(), "data.md")
	p := portable.New(portable.Patience(100 * time.Millisecond))
	heldBy(t, p, target)
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	_, err := hold.Acquire(ctx, target, hold.WithProtocol(p))
	if !errors.Is(err, hold.ErrTimeout) || !strings.Contains(err.Error(), "(patience)") {
		t.Fatalf("wait under Patience: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the wait ran until ctx ended: %v", err)
	}
}

// Ceiling bounds a wait by itself too, and the error names it.
func TestCeilingEndsWait(t *testing.T) {
	target := filepath.Join(t.TempDir(), "data.md")
	p := portable.New(portable.Ceiling(100 * time.Millisecond))
	heldBy(t, p, target)
	ctx, cancel := context.WithTimeout(context.Background(), hang)
	defer cancel()
	_, err := hold.Acquire(ctx, target, hold.WithProtocol(p))
	if !errors.Is(err, hold.ErrTimeout) || !strings.Contains(err.Error(), "the ceiling") {
		t.Fatalf("wait under Ceiling: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("the wait ran until ctx ended: %v", err)
	}
}

// StaleAfter and Grace decide when a lock whose holder cannot be asked (a
// directory without owner record, as proper-lockfile leaves) is taken
// over: its heartbeat, the directory's mtime, is set a minute back, so no
// clock is read twice.
func TestStaleAfterAndGraceJudgeOwnerlessLock(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  []portable.Option
		taken bool
	}{
		{"younger than StaleAfter", []portable.Option{portable.StaleAfter(time.Hour)}, false},
		{"older than StaleAfter", []portable.Option{portable.StaleAfter(2 * time.Second)}, true},
		{"older than StaleAfter, younger than Grace", []portable.Option{portable.StaleAfter(2 * time.Second), portable.Grace(time.Hour)}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "data.md")
			if err := os.Mkdir(target+".lock", 0o777); err != nil {
				t.Fatal(err)
			}
			old := time.Now().Add(-time.Minute)
			if err := os.Chtimes(target+".lock", old, old); err != nil {
				t.Fatal(err)
			}
			l, err := hold.TryAcquire(target, hold.WithProtocol(portable.New(c.opts...)))
			switch {
			case c.taken && err != nil:
				t.Fatalf("a stale ownerless lock was not taken over: %v", err)
			case !c.taken && !errors.Is(err, hold.ErrBusy):
				t.Fatalf("an ownerless lock that is not stale: %v", err)
			}
			if l != nil {
				l.Release()
			}
		})
	}
}

// Inspect given StaleAfter judges a lock whose holder
// cannot be asked (no owner record, as proper-lockfile leaves) by that
// stale time, as an acquisition given it does: the caller's "could I take
// it over?" answered by the protocol's one staleness rule.
func TestInspectStaleAfterJudgesAsAcquireWould(t *testing.T) {
	target := filepath.Join(t.TempDir(), "data.md")
	if err := os.Mkdir(target+".lock", 0o777); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-30 * time.Second)
	if err := os.Chtimes(target+".lock", old, old); err != nil {
		t.Fatal(err)
	}
	p := hold.WithProtocol(portable.New(portable.StaleAfter(time.Hour)))
	for _, c := range []struct {
		name string
		opts []hold.Option
		want hold.State
	}{
		{"the protocol's stale time (1h)", []hold.Option{p}, hold.HeldExclusive},
		{"StaleAfter(1m)", []hold.Option{p, hold.StaleAfter(time.Minute)}, hold.HeldExclusive},
		{"StaleAfter(5s)", []hold.Option{p, hold.StaleAfter(5 * time.Second)}, hold.Stale},
	} {
		st, err := hold.Inspect(target, c.opts...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if st.State != c.want {
			t.Errorf("Inspect with %s: %v, want %v", c.name, st.State, c.want)
		}
	}
	// The acquisition agrees with what Inspect said.
	if _, err := hold.TryAcquire(target, p, hold.StaleAfter(time.Minute)); !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("TryAcquire with StaleAfter(1m) took a lock Inspect calls held: %v", err)
	}
	l, err := hold.TryAcquire(target, p, hold.StaleAfter(5*time.Second))
	if err != nil {
		t.Fatalf("TryAcquire with StaleAfter(5s) did not take over a lock Inspect calls stale: %v", err)
	}
	l.Release()
}

// What hold asks of a protocol beyond taking locks, it finds in this one:
// Inspect through WithProtocol judges the directory, Break (lock.Breaker)
// refuses a live holder and names it, and Describe (lock.Describer, which
// `hold status` prints) says what decided the state.
func TestCapabilitiesThroughHold(t *testing.T) {
	target := filepath.Join(t.TempDir(), "data.md")
	p := portable.New()
	l := heldBy(t, p, target)
	st, err := hold.Inspect(target, hold.WithProtocol(p))
	if err != nil || st.Protocol != "dir" || st.State != hold.HeldExclusive || st.Holder.Owner.ID != l.Owner().ID {
		t.Fatalf("Inspect of a held lock: %+v %v", st, err)
	}
	var proto hold.Protocol = p
	if _, ok := proto.(lock.Breaker); !ok {
		t.Fatal("the protocol is not a lock.Breaker")
	}
	if _, err := hold.Break(target, false, hold.WithProtocol(p)); !errors.Is(err, hold.ErrBusy) || !strings.Contains(err.Error(), "alive") {
		t.Fatalf("Break of a live lock: %v", err)
	}
	d, ok := proto.(lock.Describer)
	if !ok {
		t.Fatal("the protocol is not a lock.Describer")
	}
	if why := d.Describe(l.Path()); !strings.Contains(why, "alive") {
		t.Fatalf("Describe of a lock held by this process: %q", why)
	}
}

// An idle holder whose stale time is 2 s keeps its lock: its heartbeat is
// fitted so that its own schedule never declares it lost (it beat once a
// second and called the lock lost one second after a beat, so at its
// first). Through hold.StaleAfter, the option a program sets per lock, and
// the protocol's own StaleAfter. HOLD_TEST_LONG=1 holds for a minute.
func TestShortStaleIdleHolderKeepsLock(t *testing.T) {
	idle := 15 * time.Second
	if os.Getenv("HOLD_TEST_LONG") == "1" {
		idle = time.Minute
	}
	for name, opts := range map[string][]hold.Option{
		"hold.StaleAfter":     {hold.WithProtocol(portable.New()), hold.StaleAfter(2 * time.Second)},
		"portable.StaleAfter": {hold.WithProtocol(portable.New(portable.StaleAfter(2 * time.Second)))},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l, err := hold.Acquire(context.Background(), filepath.Join(t.TempDir(), "idle"), opts...)
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-l.Lost():
				t.Fatalf("an idle holder lost its lock: %v", l.Check())
			case <-time.After(idle):
			}
			if err := l.Check(); err != nil {
				t.Fatal(err)
			}
			if err := l.Release(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestPortableSemaphore: the protocol is a lock.Semaphore, and its slots
// are the portable locks docs/portable.md lays out.
func TestPortableSemaphore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.md.lock")
	var sem lock.Semaphore = portable.New()
	req := func() *lock.Request { return &lock.Request{Path: path, Slots: 2, Owner: lock.Owner{PID: os.Getpid()}} }
	a, err := sem.TryAcquireSlot(req())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	b, err := sem.AcquireSlot(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if a.(lock.SlotHandle).Slot() != 0 || b.(lock.SlotHandle).Slot() != 1 || b.Fence() <= a.Fence() {
		t.Fatalf("slots %d, %d, tokens %d, %d", a.(lock.SlotHandle).Slot(), b.(lock.SlotHandle).Slot(), a.Fence(), b.Fence())
	}
	for _, name := range []string{"semaphore", "slot-0-of-2/owner.json", "slot-1-of-2/owner.json"} {
		if _, err := os.Stat(filepath.Join(path, name)); err != nil {
			t.Errorf("layout: %v", err)
		}
	}
	if _, err := sem.TryAcquireSlot(req()); !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("a third of 2: %v", err)
	}
	st, err := sem.InspectSlots(path)
	if err != nil || st.Slots != 2 || st.SlotHolders[0] == nil || st.SlotHolders[1] == nil {
		t.Fatalf("InspectSlots: %+v, %v", st, err)
	}
}
