package postgres_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
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

func slotReq(name string, n int) *lock.Request {
	return &lock.Request{Path: name, Slots: n, Owner: lock.Owner{PID: os.Getpid()}}
}

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
	env := connEnv + "=" + s.ConnString()
	used := map[int]bool{}
	var holders []*slottest.Holder
	for i := 0; i < 3; i++ {
		h := slottest.StartHolder(t, name, 4, env)
		if used[h.Slot] {
			t.Fatalf("place %d handed out twice", h.Slot)
		}
		used[h.Slot] = true
		holders = append(holders, h)
	}
	p := dial(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	h, err := p.AcquireSlot(ctx, slotReq(name, 4))
	if err != nil {
		t.Fatalf("the fourth place: %v", err)
	}
	t.Logf("the fourth place took %v", time.Since(start))
	defer h.Release()
	if s := h.(lock.SlotHandle).Slot(); used[s] || s < 0 || s > 3 {
		t.Errorf("the fourth holder got place %d; the others hold %v", s, used)
	}
	st, err := p.InspectSlots(name)
	if err != nil {
		t.Fatal(err)
	}
	if st.Slots != 4 || st.State != lock.HeldShared || len(st.SlotHolders) != 4 {
		t.Fatalf("InspectSlots: %+v", st)
	}
	for i, sh := range st.SlotHolders {
		if sh == nil || sh.Owner == nil || sh.Owner.PID == 0 {
			t.Errorf("slot %d: holder %+v, want every place named", i, sh)
		}
	}
	_, err = p.TryAcquireSlot(slotReq(name, 4))
	var he *lock.Error
	if !errors.Is(err, lock.ErrBusy) || !errors.As(err, &he) {
		t.Fatalf("TryAcquireSlot with every place held = %v, want ErrBusy", err)
	}
	for i := 0; i < 4; i++ {
		if !strings.Contains(he.Hint, "slot "+strconv.Itoa(i)+" by pid") {
			t.Errorf("busy error does not name the holder of slot %d: %v", i, err)
		}
	}
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
		h, err := dial(t).AcquireSlot(ctx, slotReq(name, 4))
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

// TestSlotCount: while a semaphore is held with 3 slots, a request with
// another N is refused with ErrSlotCount naming the 3 in use; a plain
// lock waits for the semaphore; once it is free, another N just works.
// TestReadersBesideSlots: readers hold beside a semaphore's places, as on
// kernel locks, and a plain lock waits for both.
func TestReadersBesideSlots(t *testing.T) {
	name := uniqueName(t)
	p := dial(t)
	h, err := p.AcquireSlot(context.Background(), slotReq(name, 2))
	if err != nil {
		t.Fatal(err)
	}
	r, err := dial(t).TryAcquire(&lock.Request{Path: name, Shared: true})
	if err != nil {
		t.Fatalf("a reader beside a semaphore's holder: %v", err)
	}
	h2, err := dial(t).TryAcquireSlot(slotReq(name, 2))
	if err != nil {
		t.Fatalf("a second place beside a reader: %v", err)
	}
	if _, err := p.TryAcquire(&lock.Request{Path: name}); !errors.Is(err, lock.ErrBusy) {
		t.Errorf("a plain try beside readers and places: %v, want ErrBusy", err)
	}
	st, err := p.InspectSlots(name)
	if err != nil {
		t.Fatal(err)
	}
	if st.Slots != 2 || st.SlotHolders[0] == nil || st.SlotHolders[1] == nil {
		t.Errorf("InspectSlots beside a reader: %+v", st)
	}
	r.Release()
	h.Release()
	h2.Release()
}

func TestSlotCount(t *testing.T) {
	name := uniqueName(t)
	p := dial(t)
	h, err := p.AcquireSlot(context.Background(), slotReq(name, 3))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 4} {
		_, err := p.AcquireSlot(context.Background(), slotReq(name, n))
		if !errors.Is(err, lock.ErrSlotCount) || !strings.Contains(err.Error(), "3 slots") {
			t.Errorf("%d slots while 3 are in use: %v, want ErrSlotCount naming 3", n, err)
		}
		if _, err := p.TryAcquireSlot(slotReq(name, n)); !errors.Is(err, lock.ErrSlotCount) {
			t.Errorf("try of %d slots while 3 are in use: %v, want ErrSlotCount", n, err)
		}
	}
	if _, err := p.TryAcquire(&lock.Request{Path: name}); !errors.Is(err, lock.ErrBusy) {
		t.Errorf("a plain try while the semaphore is held: %v, want ErrBusy", err)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	h, err = p.AcquireSlot(context.Background(), slotReq(name, 5))
	if err != nil {
		t.Fatalf("5 slots once the semaphore is free: %v", err)
	}
	// A plain holder excludes the semaphore's places.
	h.Release()
	l, err := p.Acquire(context.Background(), &lock.Request{Path: name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.TryAcquireSlot(slotReq(name, 2)); err == nil {
		t.Error("a semaphore's place was taken while a plain lock is held")
	}
	l.Release()
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
	p := dial(t)
	var held []lock.Handle
	for i := 0; i < 2; i++ {
		h, err := p.AcquireSlot(context.Background(), slotReq(name, 2))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
	}
	for i := 0; i < 2; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := dial(t).AcquireSlot(ctx, slotReq(name, 2))
		cancel()
		if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a wait past its deadline = %v, want ErrTimeout", err)
		}
	}
	held[0].Release()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := dial(t).AcquireSlot(ctx, slotReq(name, 2))
	if err != nil {
		t.Fatalf("a place once one is free: %v", err)
	}
	if s := h.(lock.SlotHandle).Slot(); s != held[0].(lock.SlotHandle).Slot() {
		t.Errorf("got place %d, want the freed %d", s, held[0].(lock.SlotHandle).Slot())
	}
	h.Release()
	held[1].Release()
}
