// Package fairq serves the waiters of one lock in arrival order.
//
// The kernel's own locks are not fair: a process that releases a lock and
// asks for it again at once usually gets it back before the waiters the
// kernel has just woken are scheduled, so under load some waiters barge
// while others starve. fairq puts a FIFO queue in front of a lock protocol
// (normally the kernel lock of internal/flock) and keeps two jobs apart:
//
//   - safety: only the holder of the main lock, the wrapped protocol's own
//     lock, enters. A fair waiter takes it exactly as a plain waiter does,
//     so fair and plain waiters on one lock path exclude each other.
//   - order: the queue decides which fair waiter may ask for the main lock
//     next. At most one fair waiter at a time waits on the main lock.
//
// Because safety never depends on the queue, a crash or a bug in the queue
// can at worst let a waiter reach the main lock early, where it simply
// blocks: never two holders. Only fair waiters are ordered; a plain waiter
// still competes with the fair waiter at the head of the queue the way
// kernel lock waiters always do.
//
// # The queue
//
// The design is etcd's mutex brought to local files: each waiter holds a
// kernel lock on its own ticket and waits on its predecessor's, never
// polling. The predecessor holds its ticket for as long as it is queued, so
// the wait ends the moment it leaves: it got the main lock, gave up (its
// context ended), or died (the kernel frees a dead process's locks).
//
//  1. Join: under a short kernel lock on the queue's counter, take the
//     next ticket number and lock that ticket exclusively, and only then
//     unlock the counter. A successor can therefore never find a ticket
//     that is numbered but not yet held by a live waiter.
//  2. Wait: find the predecessor, the highest ticket below one's own that
//     is still held, and block on a shared kernel lock on it. (On Linux a
//     waiter whose context cannot end skips the search the first time and
//     blocks on the ticket just below its own: in a queue with waiters
//     that is the predecessor, and if it is not held the wait ends at once
//     and step 4's search below it follows.)
//  3. Head: with no held ticket below its own, a waiter takes the main lock
//     through the wrapped protocol.
//  4. Leave: as soon as it holds the main lock (or gives up), the waiter
//     drops its ticket. Its successor wakes; if the ticket it waited on
//     was not the head's (that waiter gave up or died), it looks again
//     below it and waits on the next live ticket.
//
// Ticket numbers only grow. There are two ways to keep tickets:
//
//   - On Linux, one queue file, "<lock path>.queue": the counter is text at
//     its start, guarded by a lock on byte 0, and ticket t is an open file
//     description (OFD) byte-range lock on byte slotBase+t. Nothing is
//     created or removed per acquisition, and a dead waiter leaves nothing
//     behind. F_OFD_GETLK tells whether any ticket below one's own is held.
//   - Elsewhere on unix, a directory "<lock path>.q" with one ticket file per
//     waiter, named by its number in 20 digits and locked with flock(2);
//     the waiter at the head writes a mark into its ticket so that its
//     successor knows no earlier ticket can remain. A ticket below one's own
//     that is not locked belongs to a waiter that has gone, and whoever finds
//     it removes it (a name is never used twice, so this is safe).
//
// The queue file or directory stays on disk, like the lock file: removing
// it would let a newcomer start a second queue beside one still in use.
//
// A crash at any step leaves no waiter stuck: the counter lock and every
// ticket lock are kernel locks, which the kernel frees when their holder
// dies; a ticket file created but not yet locked is found unlocked and
// removed; a number taken but never used is skipped by the search for the
// predecessor.
//
// Under contention every hand-off wakes a process that sleeps in the
// kernel, and that wake-up, mostly scheduling delay, is most of its cost
// (docs/fair.md measures it). A waiter passes through the Go scheduler
// before it blocks; package internal/resched says why.
//
// Fair mode needs kernel locks on the queue's filesystem. It is
// implemented on unix; elsewhere Acquire fails with lock.ErrUnsupported.
package fairq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/resched"
	"github.com/hold-dev/hold/lock"
)

// QueueSuffix is appended to a lock path to name its queue directory.
const QueueSuffix = ".q"

// counterName is the file in the queue directory that holds the last ticket
// number handed out.
const counterName = "counter"

// ticketDigits is the width of a ticket file name: a ticket number in
// decimal, zero-padded so that names sort in ticket order.
const ticketDigits = 20

// headMark is the byte a waiter writes at the start of its ticket file once
// it is at the head of the queue: its successor then knows that no earlier
// ticket can still be waiting.
const headMark = 'H'

// Protocol implements lock.Protocol by putting a FIFO queue in front of
// Inner, which keeps providing the lock itself. The zero value is not
// usable: use New.
type Protocol struct {
	inner lock.Protocol
	// ticketFiles selects the queue of ticket files on Linux too, where
	// the default is the queue file with byte-range locks. Tests use it to
	// run the portable design where they run.
	ticketFiles bool
}

// New returns a protocol that serves fair waiters of inner's locks in
// arrival order.
func New(inner lock.Protocol) Protocol { return Protocol{inner: inner} }

// Inner returns the wrapped protocol.
func (p Protocol) Inner() lock.Protocol { return p.inner }

// Name returns the wrapped protocol's name: the lock on disk is that
// protocol's lock, and fairness is only a way of waiting for it.
func (p Protocol) Name() string { return p.inner.Name() }

// Inspect reports the main lock's state; the queue does not change who holds
// the lock.
// A free lock with a stopped waiter at the front of its queue says so
// (Status.StoppedTurn): that waiter keeps every other fair waiter out
// until the stall rule passes it over.
func (p Protocol) Inspect(path string) (*lock.Status, error) {
	st, err := p.inner.Inspect(path)
	if err == nil && st.State == lock.Free {
		st.StoppedTurn = StoppedTurn(path)
	}
	return st, err
}

// StoppedTurn describes the waiter at the front of the queue of the lock
// at lockPath when it is stopped (lock.Status.StoppedTurn), "" when none
// is queued or the one whose turn it is runs. A kernel semaphore's
// waiters queue here too, fair or not: the root asks for a free one.
func StoppedTurn(lockPath string) string {
	if w, ok := HeadWaiter(lockPath); ok && w.Stopped {
		return fmt.Sprintf("%s (passed over once the lock has been free for %s)", w, StallBound)
	}
	return ""
}

// acquire is the one path of Acquire and TryAcquire: reach the front of
// the queue, take the main lock, leave the queue. Leaving waits until the
// main lock is held (or the attempt failed): the successor must not start
// for the main lock before this waiter holds it, or the two would race for
// it as plain waiters do.
func (p Protocol) acquire(ctx context.Context, req *lock.Request, wait bool) (lock.Handle, error) {
	// The queue's waits arm timers; see proc.ReadyForLock.
	if err := proc.ReadyForLock("acquire", req.Path); err != nil {
		return nil, err
	}
	pl, err := front(ctx, req, wait, p.ticketFiles, p.free(req.Path))
	if err == errQueued {
		return nil, busyError(p, req.Path)
	}
	if err != nil {
		return nil, err
	}
	defer pl.Leave()
	if wait {
		if ctx.Done() == nil {
			resched.BeforeBlocking()
		}
		return p.inner.Acquire(ctx, req)
	}
	return p.inner.TryAcquire(req)
}

// watching returns the context a wait in the queue for req uses: the
// one its watch gives (lock.Request.Watch), which is told of the wait
// the first time, so that a waiter behind others is watched as one at the
// front is (the deadlock search: it waits for the lock as much as they
// do); ctx itself without a watch. The main lock's wait, later, is told
// again, and the watch goes on with the same wait.
func watching(ctx context.Context, req *lock.Request) context.Context {
	if req.Watch == nil {
		return ctx
	}
	return req.Watch.Waiting(ctx)
}

// free returns the test of the stall rule (see StallBound): whether the
// main lock at path is free.
func (p Protocol) free(path string) func() bool {
	return func() bool {
		st, err := p.inner.Inspect(path)
		return err == nil && st.State == lock.Free
	}
}

// The stall rule. A fair waiter stopped with Ctrl-Z (or SIGSTOP, or a
// debugger) keeps its ticket, and every waiter behind it waits on that
// ticket however long the lock stays free: the queue stalls. So a waiter
// whose predecessor is at the front of the queue (no earlier ticket is
// held) looks at the main lock every stallCheck; once it has found the
// lock free at every look for StallBound, the predecessor is not taking
// it (a running one takes a free lock within microseconds), and the
// waiter passes it over: it goes on as if the predecessor had left. The
// passed-over waiter keeps its ticket, and when it runs again it asks for
// the main lock like anyone else; safety never rested on the queue.
//
// StallBound is how long the lock must stay free before the waiter at the
// front of the queue is passed over.
const StallBound = 2 * time.Second

// stallCheck is how often a waiter looks at the lock for the stall rule.
const stallCheck = 250 * time.Millisecond

// errStalled ends a wait on a predecessor that the stall rule passed over.
var errStalled = errors.New("the fair waiter ahead kept its place while the lock stayed free")

// stallWatch applies the stall rule to one wait on a predecessor.
type stallWatch struct {
	// free reports whether the main lock is free; nil: no stall rule
	// (the queue has no lock behind it, Front).
	free func() bool
	// atFront reports whether the predecessor is at the front of the
	// queue: only then must it be taking the lock.
	atFront func() bool
	// since is when the lock was first found free with the predecessor
	// at the front, in the current run of such looks.
	since time.Time
}

// ticker returns the channel of the stall rule's looks, nil without one,
// and its stop function.
func (w *stallWatch) ticker() (<-chan time.Time, func()) {
	if w == nil || w.free == nil {
		return nil, func() {}
	}
	t := time.NewTicker(stallCheck)
	return t.C, t.Stop
}

// stalled takes one look, and reports whether the predecessor is to be
// passed over.
func (w *stallWatch) stalled(now time.Time) bool {
	if !w.atFront() || !w.free() {
		w.since = time.Time{}
		return false
	}
	if w.since.IsZero() {
		w.since = now
	}
	return now.Sub(w.since) >= StallBound
}

// await waits for a blocking lock call that runs on its own goroutine and
// reports on done, until ctx ends or the stall rule (sw, nil for none)
// passes the predecessor over. finished says the call reported, with err;
// otherwise err is ctx's or errStalled, and the call is abandoned: abandon
// runs once it reports, to drop what the call was granted (its descriptor),
// so an abandoned wait holds nothing. Both designs wait this way.
func (w *stallWatch) await(ctx context.Context, done <-chan error, abandon func()) (finished bool, err error) {
	looks, stop := w.ticker()
	defer stop()
	for {
		select {
		case err := <-done:
			return true, err
		case <-ctx.Done():
			err = ctx.Err()
		case now := <-looks:
			if !w.stalled(now) {
				continue
			}
			err = errStalled
		}
		go func() {
			<-done
			abandon()
		}()
		return false, err
	}
}

// Waiter is a fair waiter found in a queue (see HeadWaiter).
type Waiter struct {
	PID     int
	Command string
	// Stopped: the process is stopped (Ctrl-Z, SIGSTOP, a debugger).
	Stopped bool
}

// String describes the waiter for messages: "pid 4242 (hold run --fair
// T -- make), stopped".
func (w Waiter) String() string {
	s := fmt.Sprintf("pid %d", w.PID)
	if w.Command != "" {
		s += " (" + w.Command + ")"
	}
	if w.Stopped {
		s += ", stopped"
	}
	return s
}

// HeadWaiter returns the fair waiter at the front of the queue of the lock
// at lockPath, the one whose turn it is, as far as this process can find
// it: on Linux, the process holding the lowest ticket of the queue file
// (a search through the processes' open files, for messages about a
// stalled queue, never for the lock's hot path). ok is false when nobody
// is queued or the waiter cannot be found.
func HeadWaiter(lockPath string) (w Waiter, ok bool) { return headWaiter(lockPath) }

// Place is a waiter's place at the front of a queue. Every waiter that
// joins the queue after it waits until it leaves (or dies: the kernel then
// drops its place).
type Place struct {
	leave func()
	once  sync.Once
}

// Leave gives up the place; the next waiter moves to the front. Later
// calls do nothing.
func (pl *Place) Leave() { pl.once.Do(pl.leave) }

// errQueued is front's answer, when told not to wait, to a queue with
// waiters ahead.
var errQueued = errors.New("waiters are queued ahead")

// Front is the queue without a lock behind it. It joins the queue of the
// lock at req.Path and, when wait is set, waits until every waiter that
// joined earlier has left; the caller is then at the front of the queue
// and keeps every later waiter back until it calls Leave. This orders
// waiters for something that is not a kernel lock (the portable protocol
// uses it to let one local waiter at a time contend for its directory).
//
// Without wait, Front returns an error wrapping lock.ErrBusy when anyone
// is queued ahead. When ctx ends, the place is given up and the error
// wraps lock.WaitError(ctx.Err()). Fair queues exist on unix; elsewhere
// the error wraps lock.ErrUnsupported.
func Front(ctx context.Context, req *lock.Request, wait bool) (*Place, error) {
	pl, err := front(ctx, req, wait, false, nil)
	if err == errQueued {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrBusy,
			Hint: "waiters are queued ahead"}
	}
	return pl, err
}

// Acquire joins the queue, waits for every fair waiter that arrived earlier,
// then takes the main lock. When ctx ends it leaves the queue at once (its
// successor moves on) and returns an *Error wrapping WaitError(ctx.Err()).
func (p Protocol) Acquire(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(err)}
	}
	return p.acquire(ctx, req, true)
}

// TryAcquire takes the lock only if no fair waiter is queued and the main
// lock is free; it never waits.
func (p Protocol) TryAcquire(req *lock.Request) (lock.Handle, error) {
	return p.acquire(context.Background(), req, false)
}

// Waiting returns how many fair waiters are queued for the lock at
// lockPath (the one at the head included, until it holds the lock). It
// never changes the queue.
func Waiting(lockPath string) (int, error) { return waiting(lockPath) }

// ticketName is the file name of ticket n.
func ticketName(n uint64) string { return fmt.Sprintf("%0*d", ticketDigits, n) }

// parseTicket returns the number of a ticket file name, and false for any
// other name (the counter, or a stranger's file).
func parseTicket(name string) (uint64, bool) {
	if len(name) != ticketDigits {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// Hints of waitEnded: where in the queue the caller's context ended.
const (
	whileJoining = "gave up while waiting to join the fair queue"
	whileQueued  = "gave up while queued behind earlier fair waiters"
)

// waitEnded is the error of a step in the queue that failed: the caller's
// context ended (hint says where), or err itself.
func waitEnded(ctx context.Context, req *lock.Request, hint string, err error) error {
	if ctx.Err() != nil {
		if hint == whileQueued {
			if w, ok := HeadWaiter(req.Path); ok {
				hint += "; first in the queue: " + w.String()
			}
		}
		return &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(ctx.Err()), Hint: hint}
	}
	return err
}

// busyError is what TryAcquire returns when fair waiters are queued ahead.
func busyError(p Protocol, path string) error {
	e := &lock.Error{Op: "acquire", Path: path, Err: lock.ErrBusy,
		Hint: "fair waiters are queued for this lock"}
	if sem, ok := p.inner.(lock.Semaphore); ok {
		// Slot holders hold the lock file shared, and so do the
		// semaphore's waiters: name the holders only.
		if st, err := sem.InspectSlots(path); err == nil && st.Slots > 0 && st.State == lock.HeldShared && st.Holder != nil {
			e.Holder = st.Holder
			e.Hint += "; a plain lock waits until no slot of its semaphore is held, and " + st.DescribeSlots()
			return e
		}
	}
	if st, err := p.inner.Inspect(path); err == nil {
		e.Holder = st.Holder
		if st.State == lock.Free {
			// Free, yet someone is queued: name whose turn it is (a
			// stopped waiter is passed over after StallBound).
			if w, ok := HeadWaiter(path); ok {
				e.Hint += "; the lock is free, and it is the turn of " + w.String()
			}
		}
	}
	return e
}
