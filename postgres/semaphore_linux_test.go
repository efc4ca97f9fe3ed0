package postgres_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/slottest"
	"github.com/hold-dev/hold/lock"
	"github.com/hold-dev/hold/postgres"
)

func init() {
	workers = append(workers, func() (int, bool) {
		return slottest.RunWorker(func() (lock.Semaphore, func(), error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := postgres.Dial(ctx, os.Getenv(connEnv))
			if err != nil {
				return nil, nil, err
			}
			return p, func() { p.Close() }, nil
		})
	})
}

// semDial is dial for the shared semaphore checks.
func semDial(t testing.TB) slottest.Protocol { return dial(t) }

// TestSlotsUnderKills: workers take places in a 4-slot semaphore while
// holders are killed with SIGKILL, whose sessions the server ends (and
// whose places it frees) as soon as it sees their connections close.
// Never more than 4 inside, never two in one place, no acquisition lost.
func TestSlotsUnderKills(t *testing.T) {
	s := needServer(t)
	workers, each, kills := 8, 25, 20
	if v := os.Getenv("HOLD_TEST_SLOT_KILLS"); v != "" {
		// The run: 16 workers x 200 with 500 kills.
		kills, _ = strconv.Atoi(v)
		workers, each = 16, 200
	}
	slottest.Stress(t, slottest.StressConfig{
		Target: uniqueName(t), Slots: 4, Workers: workers, Each: each, Kills: kills,
		Env: []string{connEnv + "=" + s.ConnString()},
	})
}

// TestFourthSlotAtOnce: with 3 of 4 places held by other processes, a new
// request gets the fourth without waiting for any of them; with all four
// held, a try is busy naming every holder, and a waiter gets the place of
// a holder killed with SIGKILL (no NOTIFY comes from a session that ends).
func TestFourthSlotAtOnce(t *testing.T) {
	s := needServer(t)
	name := uniqueName(t)
	p := dial(t)
	h, holders := slottest.FourthAtOnce(t, p, name, connEnv+"="+s.ConnString())
	defer h.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var listed []*lock.Status
	if err := p.List(context.Background(), name, func(st *lock.Status, w int) {
		if st.Path == name {
			listed = append(listed, st)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].Slots != 4 || listed[0].SlotHolders[h.(lock.SlotHandle).Slot()] == nil {
		t.Errorf("List shows the semaphore as %+v; want one entry of 4 slots, each holder named", listed)
	}
	// A waiter, then a holder killed: the waiter gets its place.
	got := make(chan lock.Handle, 1)
	go func() {
		h, err := dial(t).AcquireSlot(ctx, slottest.Req(name, 4))
		if err != nil {
			t.Error(err)
		}
		got <- h
	}()
	raw := rawConn(t)
	eventually(t, "the waiter queued", func() bool {
		var n int
		raw.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&n)
		return n >= 4 // one wait per slot
	})
	holders[1].Kill()
	select {
	case w := <-got:
		if w == nil {
			t.FailNow()
		}
		if s := w.(lock.SlotHandle).Slot(); s != holders[1].Slot {
			t.Errorf("the waiter got place %d, want the killed holder's %d", s, holders[1].Slot)
		}
		if w.Fence() <= h.Fence() {
			t.Errorf("the waiter's token %d is not above the last holder's %d", w.Fence(), h.Fence())
		}
		w.Release()
	case <-time.After(30 * time.Second):
		t.Fatal("the waiter did not get the killed holder's place")
	}
}

// TestReadersBesideSlots: readers hold beside a semaphore's places, as on
// kernel locks, and a plain lock waits for both.
func TestReadersBesideSlots(t *testing.T) {
	slottest.ReadersBeside(t, semDial, uniqueName(t))
}

// TestSlotCount: while a semaphore is held with 3 slots, a request with
// another N is refused with ErrSlotCount naming the 3 in use; a plain
// lock waits for the semaphore; once it is free, another N just works.
func TestSlotCount(t *testing.T) {
	slottest.Count(t, dial(t), uniqueName(t), nil)
}

// TestSharedReadersNamed: readers hold together, each named by Inspect
// with its own record; a writer is busy among them and gets the lock once
// they leave.
func TestSharedReadersNamed(t *testing.T) {
	name := uniqueName(t)
	p := dial(t)
	r1, err := p.Acquire(context.Background(), &lock.Request{Path: name, Shared: true, Owner: lock.Owner{PID: os.Getpid(), Command: []string{"r1"}}})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := dial(t).TryAcquire(&lock.Request{Path: name, Shared: true, Owner: lock.Owner{PID: os.Getpid(), Command: []string{"r2"}}})
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	st, err := p.Inspect(name)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != lock.HeldShared || len(st.Holders) != 2 || st.Holders[0].Owner == nil || st.Holders[1].Owner == nil ||
		st.Holders[0].Owner.Command[0] != "r1" || st.Holders[1].Owner.Command[0] != "r2" {
		t.Errorf("Inspect of two readers: %+v", st)
	}
	if _, err := p.TryAcquire(&lock.Request{Path: name}); !errors.Is(err, lock.ErrBusy) {
		t.Errorf("a writer's try among readers: %v, want ErrBusy", err)
	}
	if tok := r1.(lock.TokenReasoner).TokenError(); !errors.Is(tok, lock.ErrNoToken) {
		t.Errorf("a reader's TokenError = %v, want ErrNoToken", tok)
	}
	r1.Release()
	r2.Release()
	w, err := p.TryAcquire(&lock.Request{Path: name})
	if err != nil {
		t.Fatalf("a writer once the readers left: %v", err)
	}
	w.Release()
	if st, _ := p.Inspect(name); st.State != lock.Free {
		t.Errorf("after all left: %v", st.State)
	}
}

// TestSlotWaitEnds: a wait for a place ends with its context, and leaves
// neither the gate nor a slot taken: the next request gets a place freed
// after it.
func TestSlotWaitEnds(t *testing.T) {
	name := uniqueName(t)
	held := slottest.HoldAll(t, dial(t), name, 2)
	for range 2 {
		slottest.WaitTimesOut(t, dial(t), name, 2)
	}
	held[0].Release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := dial(t).AcquireSlot(ctx, slottest.Req(name, 2))
	if err != nil {
		t.Fatalf("a place once one is free: %v", err)
	}
	if s := h.(lock.SlotHandle).Slot(); s != held[0].(lock.SlotHandle).Slot() {
		t.Errorf("got place %d, want the freed %d", s, held[0].(lock.SlotHandle).Slot())
	}
	h.Release()
}
