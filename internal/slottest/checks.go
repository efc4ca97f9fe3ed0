//go:build linux

package slottest

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/lock"
)

// Protocol is a protocol with semaphores, as the checks below take places
// and locks through it.
type Protocol interface {
	lock.Protocol
	lock.Semaphore
}

// Dial opens a new client of the protocol, closed when the test ends: a
// second holder beside the first needs a client of its own on the server
// protocols (a session, a lease).
type Dial func(t testing.TB) Protocol

// Req is a request of this process for a place among n slots of target.
func Req(target string, n int) *lock.Request {
	return &lock.Request{Path: target, Slots: n, Owner: lock.Owner{PID: os.Getpid()}}
}

// FourthAtOnce: with 3 of 4 places held by other processes (workers
// started with env, where the server is), a new request through p gets the
// fourth without waiting for any of them; InspectSlots then names every
// holder, and a try is busy naming each. It returns the fourth place,
// which the caller releases, and the other holders, released when the
// test ends.
func FourthAtOnce(t *testing.T, p Protocol, target string, env ...string) (lock.Handle, []*Holder) {
	t.Helper()
	used := map[int]bool{}
	var holders []*Holder
	for range 3 {
		h := StartHolder(t, target, 4, env...)
		if used[h.Slot] {
			t.Fatalf("place %d handed out twice", h.Slot)
		}
		used[h.Slot] = true
		holders = append(holders, h)
	}
	// The bound only catches a hang: the holders keep their places until
	// the test ends.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	h, err := p.AcquireSlot(ctx, Req(target, 4))
	if err != nil {
		t.Fatalf("the fourth place: %v", err)
	}
	t.Logf("the fourth place took %v", time.Since(start))
	if s := h.(lock.SlotHandle).Slot(); used[s] || s < 0 || s > 3 {
		t.Errorf("the fourth holder got place %d; the others hold %v", s, used)
	}
	st, err := p.InspectSlots(target)
	if err != nil {
		h.Release()
		t.Fatal(err)
	}
	if st.Slots != 4 || st.State != lock.HeldShared || len(st.SlotHolders) != 4 {
		h.Release()
		t.Fatalf("InspectSlots: %+v", st)
	}
	for i, sh := range st.SlotHolders {
		if sh == nil || sh.Owner == nil || sh.Owner.PID == 0 {
			t.Errorf("slot %d: holder %+v, want every place named", i, sh)
		}
	}
	// All four held: a try is busy and names every holder.
	_, err = p.TryAcquireSlot(Req(target, 4))
	var he *lock.Error
	if !errors.Is(err, lock.ErrBusy) || !errors.As(err, &he) {
		h.Release()
		t.Fatalf("TryAcquireSlot with every place held = %v, want ErrBusy", err)
	}
	for i := range 4 {
		if !strings.Contains(he.Hint, "slot "+strconv.Itoa(i)+" by pid") {
			t.Errorf("busy error does not name the holder of slot %d: %v", i, err)
		}
	}
	return h, holders
}

// ReadersBeside: readers hold beside a semaphore's places, as on kernel
// locks, and a plain lock waits for both.
func ReadersBeside(t *testing.T, dial Dial, target string) {
	t.Helper()
	p := dial(t)
	h, err := p.AcquireSlot(context.Background(), Req(target, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	r, err := dial(t).TryAcquire(&lock.Request{Path: target, Shared: true})
	if err != nil {
		t.Fatalf("a reader beside a semaphore's holder: %v", err)
	}
	defer r.Release()
	h2, err := dial(t).TryAcquireSlot(Req(target, 2))
	if err != nil {
		t.Fatalf("a second place beside a reader: %v", err)
	}
	defer h2.Release()
	if _, err := p.TryAcquire(&lock.Request{Path: target}); !errors.Is(err, lock.ErrBusy) {
		t.Errorf("a plain try beside readers and places: %v, want ErrBusy", err)
	}
	st, err := p.InspectSlots(target)
	if err != nil {
		t.Fatal(err)
	}
	if st.Slots != 2 || st.SlotHolders[0] == nil || st.SlotHolders[1] == nil {
		t.Errorf("InspectSlots beside a reader: %+v", st)
	}
}

// Count: while a semaphore is held with 3 slots, a request with another N
// (a wait or a try) is refused with ErrSlotCount naming the 3 in use, and
// a plain try is busy; refused runs after those refusals, for what the
// protocol checks besides. Once the semaphore is free another N just
// works. Last a plain lock is held, and Count returns the error of a
// semaphore's try beside it, which the caller checks (nil fails the test).
func Count(t *testing.T, p Protocol, target string, refused func()) error {
	t.Helper()
	h, err := p.AcquireSlot(context.Background(), Req(target, 3))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 4} {
		_, err := p.AcquireSlot(context.Background(), Req(target, n))
		if !errors.Is(err, lock.ErrSlotCount) || !strings.Contains(err.Error(), "3 slots") {
			t.Errorf("%d slots while 3 are in use: %v, want ErrSlotCount naming 3", n, err)
		}
		if _, err := p.TryAcquireSlot(Req(target, n)); !errors.Is(err, lock.ErrSlotCount) {
			t.Errorf("try of %d slots while 3 are in use: %v, want ErrSlotCount", n, err)
		}
	}
	// A plain lock waits for the semaphore's holders.
	if _, err := p.TryAcquire(&lock.Request{Path: target}); !errors.Is(err, lock.ErrBusy) {
		t.Errorf("a plain try while the semaphore is held: %v, want ErrBusy", err)
	}
	if refused != nil {
		refused()
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	h, err = p.AcquireSlot(context.Background(), Req(target, 5))
	if err != nil {
		t.Fatalf("5 slots once the semaphore is free: %v", err)
	}
	h.Release()
	l, err := p.Acquire(context.Background(), &lock.Request{Path: target})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	sh, err := p.TryAcquireSlot(Req(target, 2))
	if err == nil {
		sh.Release()
		t.Error("a semaphore's place was taken while a plain lock is held")
	}
	return err
}

// HoldAll takes every place of a semaphore of n slots through p, released
// when the test ends.
func HoldAll(t *testing.T, p Protocol, target string, n int) []lock.Handle {
	t.Helper()
	var held []lock.Handle
	for range n {
		h, err := p.AcquireSlot(context.Background(), Req(target, n))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Release() })
		held = append(held, h)
	}
	return held
}

// WaitTimesOut checks that a wait for a place of target's n slots, all
// held, ends with ErrTimeout once its context's deadline passes.
func WaitTimesOut(t *testing.T, p Protocol, target string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := p.AcquireSlot(ctx, Req(target, n)); !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a wait past its deadline = %v, want ErrTimeout", err)
	}
}
