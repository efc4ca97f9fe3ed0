package portable

import (
	"context"
	"time"

	"github.com/hold-dev/hold/internal/dirlock"
	"github.com/hold-dev/hold/lock"
)

// The capabilities hold finds in the portable protocol: hold.Break and
// `hold break` remove a lock whose holder died, `hold status` says what
// decided a lock's state, and hold.Slots takes a slot of a semaphore.
var (
	_ lock.Protocol       = (*Protocol)(nil)
	_ lock.Breaker        = (*Protocol)(nil)
	_ lock.Describer      = (*Protocol)(nil)
	_ lock.StaleInspector = (*Protocol)(nil)
	_ lock.Semaphore      = (*Protocol)(nil)
)

// Protocol is hold's portable directory lock. Create it with New, once,
// and reuse it: it remembers which locks it holds, which is how it tells a
// lock of this process that a live handle owns from a leftover of this
// process that nobody does. It is safe for concurrent use. It is opaque:
// its options are New's.
type Protocol struct {
	cfg dirlock.Config // what the options set; the rest is resolved by dirlock.New
	dl  *dirlock.Protocol
}

// An Option sets a timing knob of the portable protocol. A zero or
// negative duration leaves the default (or environment) value, so a caller
// can pass through a setting it did not get.
type Option func(*Protocol)

// StaleAfter sets how old a lock's heartbeat must be before a holder that
// cannot be asked (no owner record, another host) is presumed gone.
// Default 10s, proper-lockfile's default: keep it at least the stale
// setting of any Node tool sharing the lock, or hold may take a live Node
// lock. Environment: HOLD_DIR_STALE.
func StaleAfter(d time.Duration) Option { return func(p *Protocol) { p.cfg.Stale = d } }

// Heartbeat sets how often a holder refreshes its lock and checks it is
// still its own: the delay before a removed lock is reported lost. Default
// 1s; never more than half of StaleAfter, so one late beat cannot make a
// live lock look stale, and shortened so that a holder beats at least
// three times before it would call its own lock lost. Environment:
// HOLD_DIR_HEARTBEAT.
func Heartbeat(d time.Duration) Option { return func(p *Protocol) { p.cfg.Heartbeat = d } }

// Grace sets the floor under every age judgement: a lock (or reclaim
// guard) younger than this is never taken, however small StaleAfter is,
// because a lock between its mkdir and its owner record is ownerless for a
// moment. Default 1s. Environment: HOLD_DIR_GRACE.
func Grace(d time.Duration) Option { return func(p *Protocol) { p.cfg.Grace = d } }

// Patience sets the per-holder timeout: Acquire fails with hold.ErrTimeout
// when the lock stayed with one holder for this long, and waits on while
// it keeps changing hands. Default: none (only ctx bounds the wait).
// Environment: HOLD_DIR_PATIENCE.
func Patience(d time.Duration) Option { return func(p *Protocol) { p.cfg.Patience = d } }

// Ceiling bounds a wait that Patience keeps extending, so a lock that
// changes hands forever cannot keep a waiter forever. Default: 10 ×
// Patience (none without Patience). Environment: HOLD_DIR_CEILING.
func Ceiling(d time.Duration) Option { return func(p *Protocol) { p.cfg.Ceiling = d } }

// MaxPoll caps the backoff between attempts: the added latency of a
// hand-off where directory events do not arrive (network filesystems).
// Default 50ms. Environment: HOLD_DIR_MAX_POLL.
func MaxPoll(d time.Duration) Option { return func(p *Protocol) { p.cfg.MaxPoll = d } }

// New returns the portable protocol with the knobs opts set; the others
// come from the HOLD_DIR_* environment variables or the defaults.
func New(opts ...Option) *Protocol {
	p := &Protocol{}
	for _, o := range opts {
		if o != nil {
			o(p)
		}
	}
	p.dl = dirlock.New(p.cfg)
	return p
}

// Name returns "dir", the protocol's name on the command line
// (--protocol dir) and in owner records and Status.
func (p *Protocol) Name() string { return p.dl.Name() }

// Acquire waits until the lock at req.Path is held, ctx ends, or the
// Patience or Ceiling rule gives up; the error then says which bound
// expired and who holds the lock.
func (p *Protocol) Acquire(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	return p.dl.Acquire(ctx, req)
}

// TryAcquire takes the lock at req.Path if it is free or stale, and
// otherwise fails at once with an error matching hold.ErrBusy that names
// the holder.
func (p *Protocol) TryAcquire(req *lock.Request) (lock.Handle, error) {
	return p.dl.TryAcquire(req)
}

// Inspect reports the state of the lock at path without taking it: free,
// held, or stale by the rules a waiter applies, with the owner record and
// whether the holder is alive. Something at path that is not a lock (a
// data file, a directory of other files) is an error matching
// hold.ErrForeign, never a lock.
func (p *Protocol) Inspect(path string) (*lock.Status, error) { return p.dl.Inspect(path) }

// InspectStale is Inspect judging a holder it cannot ask (no owner
// record, another host) by the stale time stale instead of the
// protocol's: what an acquisition given that stale time would conclude.
func (p *Protocol) InspectStale(path string, stale time.Duration) (*lock.Status, error) {
	return p.dl.InspectStale(path, stale)
}

// Break removes the lock at path when its holder is provably gone, by the
// rules and under the guard of a waiter's takeover, and refuses a live
// holder with an error matching hold.ErrBusy that names it. With force it
// removes the lock whatever its state; a live holder then finds its lock
// lost. It returns the state it found.
func (p *Protocol) Break(path string, force bool) (*lock.Status, error) {
	return p.dl.Break(path, force)
}

// Describe says in a few words what decided the state of the lock at path
// ("owner process is gone", "no owner record, heartbeat 3.2s old"), which
// `hold status` prints beside the state.
func (p *Protocol) Describe(path string) string { return p.dl.Describe(path) }

// AcquireSlot waits for one of req.Slots slots of the semaphore at
// req.Path (see the package documentation), and ends as Acquire does. A
// semaphore held with another number of slots fails at once with an
// error matching hold.ErrSlotCount that names the number in use; so does
// a path that holds a plain lock. The handle's Slot is the place held.
func (p *Protocol) AcquireSlot(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	return p.dl.AcquireSlot(ctx, req)
}

// TryAcquireSlot takes a free (or stale) slot of the semaphore at
// req.Path, and otherwise fails at once with an error matching
// hold.ErrBusy that names every holder.
func (p *Protocol) TryAcquireSlot(req *lock.Request) (lock.Handle, error) {
	return p.dl.TryAcquireSlot(req)
}

// InspectSlots reports the semaphore at path without taking a slot: the
// number of slots in use (or last used, while none is held) and each
// slot's holder, judged by the rules of a plain lock. Inspect and Break
// on a semaphore's path act on its slots too.
func (p *Protocol) InspectSlots(path string) (*lock.Status, error) {
	return p.dl.InspectSlots(path)
}
