package fairq

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/lock"
)

func designs() []string { return []string{ofdDesign, ticketsDesign} }

// lockedSlots lists the tickets whose slots are locked in the queue file
// of the lock at path, asking the kernel from a descriptor of our own.
func lockedSlots(t *testing.T, path string) []uint64 {
	t.Helper()
	q, err := openOFDQueue(path + queueFileSuffix)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(q.fd)
	var out []uint64
	from := uint64(1)
	for {
		live, err := q.held(from, 1<<40)
		if err != nil {
			t.Fatal(err)
		}
		if live == 0 {
			return out
		}
		out = append(out, live)
		from = live + 1
	}
}

// TestOFDQueueFileRefusesSymlink: a symlink planted at the queue file's
// path is not followed.
func TestOFDQueueFileRefusesSymlink(t *testing.T) {
	path := lockPath(t)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.Symlink(victim, path+queueFileSuffix); err != nil {
		t.Fatal(err)
	}
	_, err := newProtocol(ofdDesign).TryAcquire(request(path))
	if !errors.Is(err, lock.ErrNotRegular) {
		t.Fatalf("got %v, want ErrNotRegular", err)
	}
	if _, err := os.Lstat(victim); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the symlink was followed: %v", err)
	}
}

// TestOFDForeignQueueFile: a queue file that holds something other than
// a counter is not hold's: newcomers are refused with ErrForeign and it is
// not written, while the waiter already queued is not disturbed.
func TestOFDForeignQueueFile(t *testing.T) {
	path := lockPath(t)
	p := newProtocol(ofdDesign)
	for i := 0; i < 5; i++ {
		h, err := p.TryAcquire(request(path))
		if err != nil {
			t.Fatal(err)
		}
		h.Release()
	}
	main := holdMain(t, path)
	firstDone := make(chan error, 1)
	go func() {
		h, err := p.Acquire(context.Background(), request(path))
		if err == nil {
			err = h.Release()
		}
		firstDone <- err
	}()
	waitFor(t, "first waiter is queued", func() bool { return len(lockedSlots(t, path)) == 1 })
	foreign := []byte("garbage!")
	if err := os.WriteFile(path+queueFileSuffix, foreign, 0o666); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.TryAcquire(request(path)); !errors.Is(err, lock.ErrForeign) {
		t.Fatalf("TryAcquire with a foreign queue file: got %v, want ErrForeign", err)
	}
	if _, err := p.Acquire(ctx, request(path)); !errors.Is(err, lock.ErrForeign) {
		t.Fatalf("Acquire with a foreign queue file: got %v, want ErrForeign", err)
	}
	b, err := os.ReadFile(path + queueFileSuffix)
	if err != nil || string(b) != string(foreign) {
		t.Fatalf("queue file now %q, %v; want it untouched", b, err)
	}
	if err := main.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
}

// holdCounter takes the queue counter's lock as another waiter would, and
// returns its release.
func holdCounter(t *testing.T, design, path string) func() {
	t.Helper()
	if design == ticketsDesign {
		return holdTicketCounter(t, path)
	}
	q, err := openOFDQueue(path + queueFileSuffix)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ofdLock(q.fd, unix.F_OFD_SETLK, unix.F_WRLCK, 0, 1); err != nil {
		t.Fatal(err)
	}
	return func() { unix.Close(q.fd) }
}

// predecessorLog is a slog handler that records the predecessor of every
// "waiting in fair queue" debug event.
type predecessorLog struct {
	mu    sync.Mutex
	preds []uint64
}

func (l *predecessorLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *predecessorLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *predecessorLog) WithGroup(string) slog.Handler            { return l }
func (l *predecessorLog) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "predecessor" {
			l.mu.Lock()
			l.preds = append(l.preds, a.Value.Uint64())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *predecessorLog) list() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.preds)
}

// TestOFDWaitPastGap: a waiter whose context cannot end waits on the ticket
// just below its own without asking first. When that ticket was never held
// (here the counter skipped five numbers, as a crash after taking a number
// would), the wait ends at once and the waiter must still find and wait
// behind the earlier waiter further down, then get the lock after it.
func TestOFDWaitPastGap(t *testing.T) {
	path := lockPath(t)
	p := newProtocol(ofdDesign)
	main := holdMain(t, path)
	type result struct {
		h   lock.Handle
		err error
	}
	first := make(chan result, 1)
	go func() {
		h, err := p.Acquire(context.Background(), request(path))
		first <- result{h, err}
	}()
	waitFor(t, "first waiter is queued", func() bool { return len(lockedSlots(t, path)) == 1 })
	k := lockedSlots(t, path)[0]
	// Under the counter's lock, so that the first waiter has published
	// its number before this overwrites it.
	q, err := openOFDQueue(path + queueFileSuffix)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the counter is free", func() bool {
		_, err := ofdLock(q.fd, unix.F_OFD_SETLK, unix.F_WRLCK, 0, 1)
		return err == nil
	})
	err = os.WriteFile(path+queueFileSuffix, []byte(ticketName(k+5)+"\n"), 0o666)
	unix.Close(q.fd)
	if err != nil {
		t.Fatal(err)
	}
	log := &predecessorLog{}
	second := make(chan error, 1)
	go func() {
		req := request(path)
		req.Logger = slog.New(log)
		h, err := p.Acquire(context.Background(), req)
		if err == nil {
			err = h.Release()
		}
		second <- err
	}()
	waitFor(t, "second waiter waits behind the first", func() bool { return slices.Contains(log.list(), k) })
	if err := main.Release(); err != nil {
		t.Fatal(err)
	}
	r := <-first
	if r.err != nil {
		t.Fatal(r.err)
	}
	select {
	case err := <-second:
		t.Fatalf("second waiter done while the first holds the lock (%v)", err)
	default:
	}
	if err := r.h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if got, want := log.list(), []uint64{k + 5, k}; !slices.Equal(got, want) {
		t.Fatalf("second waiter waited on tickets %v, want %v (the one just below its own, then the first waiter's)", got, want)
	}
	if left := lockedSlots(t, path); len(left) != 0 {
		t.Fatalf("tickets left behind: %v", left)
	}
}

// A waiter more than two strides back, in a process whose last wait was
// long, waits in steps (see stageTickets), and still reaches the front
// exactly when the last waiter ahead of it leaves: never before,
// whichever way they leave.
func TestOFDStagedWait(t *testing.T) {
	// As if this process's last wait had been long, at an unknown rate:
	// stage this one, a stride of stageTickets.
	defer lastWait.Store(lastWait.Load())
	defer perTicket.Store(perTicket.Load())
	lastWait.Store(int64(time.Second))
	perTicket.Store(0)
	path := lockPath(t)
	ahead := queueUp(t, path, 2*stageTickets+3)
	reached := make(chan error, 1)
	go func() {
		pl, err := Front(context.Background(), request(path), true)
		if err == nil {
			pl.Leave()
		}
		reached <- err
	}()
	waitFor(t, "the waiter queued", func() bool { return len(lockedSlots(t, path)) == len(ahead)+1 })
	// Leave out of order: first the one its staged wait is on, then the
	// rest from the back, the first last.
	stage := 1 + stageTickets // the ticket of its first step: a stride past the front
	order := []int{stage - 1}
	for i := len(ahead) - 1; i >= 0; i-- {
		if i != stage-1 {
			order = append(order, i)
		}
	}
	for _, i := range order {
		select {
		case err := <-reached:
			t.Fatalf("reached the front with %d waiters still ahead (%v)", len(lockedSlots(t, path))-1, err)
		case <-time.After(20 * time.Millisecond):
		}
		unix.Close(ahead[i].fd)
		ahead[i].fd = -1
	}
	select {
	case err := <-reached:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("never reached the front once everyone ahead had left")
	}
}

// counterFree reports whether nobody holds the queue counter's lock, that
// is, no waiter is in the middle of taking a ticket.
func counterFree(t *testing.T, design, path string) bool {
	t.Helper()
	if design == ticketsDesign {
		return ticketCounterFree(t, path)
	}
	q, err := openOFDQueue(path + queueFileSuffix)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(q.fd)
	lk, err := ofdLock(q.fd, unix.F_OFD_GETLK, unix.F_WRLCK, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return lk.Type == unix.F_UNLCK
}

// TestOFDStagedWaitStride: the steps of a staged wait are a stride apart,
// the stride being the tickets that fit in stageSpan at the rate this
// process last saw, so that no single wait grows with the queue: with 51
// waiters ahead and a rate of 32 tickets per stageSpan, the waiter waits
// for ticket 33 (a stride past the front), then for its predecessor. At a
// rate so slow that no stride fits stageLimit, it takes one step only, to
// stageTickets before its own ticket.
func TestOFDStagedWaitStride(t *testing.T) {
	t.Run("fits", func(t *testing.T) { testStagedStride(t, int64(stageSpan/32), []uint64{33, 51}) })
	t.Run("too slow", func(t *testing.T) { testStagedStride(t, int64(stageLimit/10), []uint64{52 - stageTickets, 51}) })
}

func testStagedStride(t *testing.T, per int64, want []uint64) {
	defer lastWait.Store(lastWait.Load())
	defer perTicket.Store(perTicket.Load())
	lastWait.Store(int64(time.Second))
	perTicket.Store(per)
	path := lockPath(t)
	ahead := queueUp(t, path, 51)
	log := &predecessorLog{}
	reached := make(chan error, 1)
	go func() {
		req := request(path)
		req.Logger = slog.New(log)
		pl, err := Front(context.Background(), req, true)
		if err == nil {
			pl.Leave()
		}
		reached <- err
	}()
	waitFor(t, "the waiter queued", func() bool { return len(lockedSlots(t, path)) == len(ahead)+1 })
	waitFor(t, "the waiter waits on its first step", func() bool { return len(log.list()) > 0 })
	for _, q := range ahead {
		unix.Close(q.fd)
		q.fd = -1
	}
	if err := <-reached; err != nil {
		t.Fatal(err)
	}
	if got := log.list(); !slices.Equal(got, want) {
		t.Fatalf("waited on tickets %v, want %v", got, want)
	}
}

// queueUp queues n waiters on the lock at path, each on a queue file of
// its own, closed at the end of the test unless closed before (fd -1).
func queueUp(t *testing.T, path string, n int) []*ofdQueue {
	t.Helper()
	ahead := make([]*ofdQueue, n)
	for i := range ahead {
		q, err := openOFDQueue(path + queueFileSuffix)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if q.fd >= 0 {
				unix.Close(q.fd)
			}
		})
		if _, err := q.join(context.Background()); err != nil {
			t.Fatal(err)
		}
		ahead[i] = q
	}
	return ahead
}
