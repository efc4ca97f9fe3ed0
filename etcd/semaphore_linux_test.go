package etcd_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hold-dev/hold/etcd"
	"github.com/hold-dev/hold/internal/slottest"
	"github.com/hold-dev/hold/lock"
)

// slotTTL is the lease TTL of the semaphore tests' workers: a killed
// holder's place is free within it. Long enough that a worker on a loaded
// machine keeps its lease (a short TTL leaves a keep-alive less than a
// second to be acknowledged).
const slotTTL = 8 * time.Second

func init() {
	workers = append(workers, func() (int, bool) {
		return slottest.RunWorker(func() (lock.Semaphore, func(), error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := etcd.Dial(ctx, etcd.Config{Endpoints: []string{os.Getenv(endpointEnv)}}, etcd.WithTTL(slotTTL))
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
// holders are killed with SIGKILL; half of the killed holders' keys are
// deleted at once (a break), the others' places wait for their leases to
// expire.
// Never more than 4 inside, never two in one place, no acquisition lost.
func TestSlotsUnderKills(t *testing.T) {
	workers, each, kills, expire := 8, 25, 12, 2
	if v := os.Getenv("HOLD_TEST_SLOT_KILLS"); v != "" {
		// The run: 16 workers x 200 with 500 kills, each
		// killed holder's key deleted (a lease expiry for each would
		// keep a place for the TTL, 500 times).
		kills, _ = strconv.Atoi(v)
		workers, each, expire = 16, 200, kills+1
	}
	key := uniqueKey(t)
	c := rawClient(t)
	n := 0
	slottest.Stress(t, slottest.StressConfig{
		Target: key, Slots: 4, Workers: workers, Each: each, Kills: kills,
		Env: []string{endpointEnv + "=" + testEndpoint},
		AfterKill: func(t testing.TB, pid int) {
			if n++; n%expire == 0 {
				return // this one's place waits for its lease to expire
			}
			deleteKeysOf(t, c, key, pid)
		},
	})
}

// deleteKeysOf deletes the keys whose owner record names pid.
func deleteKeysOf(t testing.TB, c *clientv3.Client, key string, pid int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, key+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if strings.Contains(string(kv.Value), `"pid":`+strconv.Itoa(pid)+`,`) {
			if _, err := c.Delete(ctx, string(kv.Key)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestFourthSlotAtOnce: with 3 of 4 places held by other processes, a new
// request gets the fourth without waiting for any of them.
func TestFourthSlotAtOnce(t *testing.T) {
	key := uniqueKey(t)
	p := dial(t)
	h, _ := slottest.FourthAtOnce(t, p, key, endpointEnv+"="+testEndpoint)
	defer h.Release()
	var listed []*lock.Status
	var waiting []int
	if err := p.List(context.Background(), key[:strings.LastIndexByte(key, '/')], func(st *lock.Status, w int) {
		if st.Path == key {
			listed, waiting = append(listed, st), append(waiting, w)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].Slots != 4 || waiting[0] != 0 {
		t.Errorf("List shows the semaphore as %+v with %v waiters; want one entry of 4 slots, no waiter", listed, waiting)
	}
}

// TestSlotWaitersFIFOAndTokens: with every place held, waiters are let in
// in the order they came, each into the place just freed, and tokens rise
// across places.
func TestSlotWaitersFIFOAndTokens(t *testing.T) {
	key := uniqueKey(t)
	ctx := context.Background()
	held := slottest.HoldAll(t, dial(t), key, 2)
	if a, b := held[0].(lock.SlotHandle).Slot(), held[1].(lock.SlotHandle).Slot(); a != 0 || b != 1 {
		t.Fatalf("places %d and %d, want 0 and 1", a, b)
	}
	c := rawClient(t)
	got := make(chan lock.Handle, 3)
	for i := 0; i < 3; i++ {
		go func() {
			h, err := dial(t).AcquireSlot(ctx, slottest.Req(key, 2))
			if err != nil {
				t.Error(err)
			}
			got <- h
		}()
		waitKeys(t, c, key, int64(3+i)) // queued in this order
	}
	last := max(held[0].Fence(), held[1].Fence())
	for i := 0; i < 3; i++ {
		freed := held[1].(lock.SlotHandle).Slot()
		if err := held[1].Release(); err != nil {
			t.Fatal(err)
		}
		var h lock.Handle
		select {
		case h = <-got:
		case <-time.After(30 * time.Second):
			t.Fatal("no waiter let in after a release")
		}
		if h == nil {
			t.FailNow()
		}
		if s := h.(lock.SlotHandle).Slot(); s != freed {
			t.Errorf("waiter %d got place %d, want the freed %d", i, s, freed)
		}
		if h.Fence() <= last {
			t.Errorf("waiter %d token %d, not above %d", i, h.Fence(), last)
		}
		last = h.Fence()
		held[1] = h
	}
	held[0].Release()
	held[1].Release()
}

// TestReadersBesideSlots: readers hold beside a semaphore's places, as on
// kernel locks, and a plain lock waits for both.
func TestReadersBesideSlots(t *testing.T) {
	slottest.ReadersBeside(t, semDial, uniqueKey(t))
}

// TestSlotCount: while a semaphore is held with 3 slots, a request with
// another N, or for a plain lock, is refused with ErrSlotCount naming the
// 3 in use; once it is free, another N just works.
func TestSlotCount(t *testing.T) {
	key := uniqueKey(t)
	err := slottest.Count(t, dial(t), key, func() {
		if n := countKeys(t, rawClient(t), key); n != 1 {
			t.Errorf("refused requests left keys: %d, want the holder's only", n)
		}
	})
	if !errors.Is(err, lock.ErrSlotCount) || !strings.Contains(err.Error(), "plain") {
		t.Errorf("a semaphore try while a plain lock is held: %v, want ErrSlotCount naming the plain lock", err)
	}
}

// TestSharedReadersThenWriter: readers hold together, each named by
// Inspect; a writer waits for them, and a reader that comes after the
// waiting writer waits for it (no writer starves).
func TestSharedReadersThenWriter(t *testing.T) {
	key := uniqueKey(t)
	p := dial(t)
	ctx := context.Background()
	r1, err := p.Acquire(ctx, &lock.Request{Path: key, Shared: true, Owner: lock.Owner{PID: os.Getpid(), Command: []string{"r1"}}})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := dial(t).TryAcquire(&lock.Request{Path: key, Shared: true, Owner: lock.Owner{PID: os.Getpid(), Command: []string{"r2"}}})
	if err != nil {
		t.Fatalf("a second reader: %v", err)
	}
	st, err := p.Inspect(key)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != lock.HeldShared || len(st.Holders) != 2 || st.Holders[0].Owner.Command[0] != "r1" || st.Holders[1].Owner.Command[0] != "r2" {
		t.Errorf("Inspect of two readers: %+v", st)
	}
	if _, err := p.TryAcquire(&lock.Request{Path: key}); !errors.Is(err, lock.ErrBusy) {
		t.Errorf("a writer's try among readers: %v, want ErrBusy", err)
	}
	wrote := make(chan lock.Handle, 1)
	go func() {
		h, err := dial(t).Acquire(ctx, &lock.Request{Path: key})
		if err != nil {
			t.Error(err)
		}
		wrote <- h
	}()
	c := rawClient(t)
	waitKeys(t, c, key, 3)
	// A reader behind the waiting writer waits too.
	if _, err := p.TryAcquire(&lock.Request{Path: key, Shared: true}); !errors.Is(err, lock.ErrBusy) {
		t.Errorf("a reader's try behind a waiting writer: %v, want ErrBusy", err)
	}
	read := make(chan lock.Handle, 1)
	go func() {
		h, err := dial(t).Acquire(ctx, &lock.Request{Path: key, Shared: true})
		if err != nil {
			t.Error(err)
		}
		read <- h
	}()
	waitKeys(t, c, key, 4)
	r1.Release()
	select {
	case <-wrote:
		t.Fatal("the writer got the lock while a reader held it")
	case <-read:
		t.Fatal("a reader behind a waiting writer went first")
	case <-time.After(200 * time.Millisecond):
	}
	r2.Release()
	var w lock.Handle
	select {
	case w = <-wrote:
	case <-time.After(30 * time.Second):
		t.Fatal("the writer was not let in after the readers left")
	}
	if w == nil {
		t.FailNow()
	}
	if st, _ := p.Inspect(key); st.State != lock.HeldExclusive {
		t.Errorf("while the writer holds: %v", st.State)
	}
	select {
	case <-read:
		t.Fatal("a reader got the lock while the writer held it")
	case <-time.After(200 * time.Millisecond):
	}
	w.Release()
	select {
	case r := <-read:
		if r != nil {
			if tok := (r.(lock.TokenReasoner)).TokenError(); !errors.Is(tok, lock.ErrNoToken) {
				t.Errorf("a reader's TokenError = %v, want ErrNoToken", tok)
			}
			r.Release()
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reader was not let in after the writer left")
	}
}

// TestSlotWaitEnds: a wait for a place ends with its context, leaving no
// key behind, and Close ends a wait too.
func TestSlotWaitEnds(t *testing.T) {
	key := uniqueKey(t)
	held := slottest.HoldAll(t, dial(t), key, 2)
	slottest.WaitTimesOut(t, dial(t), key, 2)
	c := rawClient(t)
	waitKeys(t, c, key, 2)
	q := dial(t)
	done := make(chan error, 1)
	go func() {
		_, err := q.AcquireSlot(context.Background(), slottest.Req(key, 2))
		done <- err
	}()
	waitKeys(t, c, key, 3)
	q.Close()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("a wait through a closed protocol = %v, want an error saying it was closed", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not end the wait")
	}
	waitKeys(t, c, key, 2)
	held[0].Release()
	h, err := dial(t).TryAcquireSlot(slottest.Req(key, 2))
	if err != nil {
		t.Fatalf("a try once a place is free: %v", err)
	}
	h.Release()
}
