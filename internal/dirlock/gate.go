package dirlock

import (
	"context"
	"errors"
	"runtime"
	"time"

	"github.com/hold-dev/hold/internal/core"
	"github.com/hold-dev/hold/internal/fairq"
	"github.com/hold-dev/hold/internal/flock"
)

// gateProto is the lock behind the gate: the kernel lock of package flock,
// with package fairq's queue in front of it where that exists (unix), so
// local waiters pass the gate in arrival order.
//
// Why the queue: a kernel lock hands nothing over; it wakes a waiter and
// lets it try again. A holder that releases the directory and asks again
// at once (any worker loop) finds the gate free, because the waiter the
// kernel woke when the gate was last let go of has not run yet, and takes
// it back: the lock then goes round one process instead of being handed
// on. Measured here with the package's hand-off benchmark on tmpfs, 8
// processes: about 830 hand-offs/s with the plain kernel lock as the gate
// (acquisitions by another process; 3600-4200 acquisitions/s in all),
// 3550-3620 with the queue, where nearly every acquisition is a hand-off;
// 30 processes: 690-910 against 1200-1660. The queue costs an uncontended
// acquisition some 20-40 µs more on tmpfs.
//
// Safety never rests on the queue, nor on the gate: the directory is the
// lock.
var gateProto = func() core.Protocol {
	if runtime.GOOS == "windows" {
		// No queue there (fairq is unix-only): the plain kernel lock still
		// ends the herd, without the order.
		return flock.Protocol{}
	}
	return fairq.New(flock.Protocol{})
}()

// GateSuffix names the waiting gate: "<lock path>.gate", a plain file
// beside the lock that only hold uses (Node tools never look at it); on
// unix the gate's queue adds "<lock path>.gate.queue" (Linux) or a
// directory "<lock path>.gate.q" (see package fairq).
//
// The problem it solves: every waiter on this machine was woken by every
// release, and they all raced for the one mkdir; with tens of waiters the
// losers' mkdirs, stats and owner reads queued on the parent directory's
// lock in front of the winner's mkdir and stamp and the releaser's
// cleanup, and hand-offs got slower than proper-lockfile's.
//
// The gate is a kernel lock on that file (see gateProto). Among the
// waiters of this machine, only the one holding the gate runs the acquire
// loop; the others sleep in the kernel, which wakes them one at a time and
// frees the gate of a process that dies. The directory remains the lock:
// the gate holder still contends, by mkdir, with other hosts, Node tools
// and hold processes that could not use the gate, and every rule of the
// loop (judging, reclaim, read-back) applies unchanged.
//
// The gate is held while waiting, not while holding: the winner of the
// directory lets go of the gate at once, so the next local waiter already
// watches the directory (inotify) while the lock is held, and takes it the
// moment it is released, instead of first being woken by the release of
// the gate. Holding the gate for the whole hold would also break `hold
// break`: breaking a hung holder's lock removes the directory, but a gate
// held by the hung process would keep every local waiter asleep behind
// it. Here the gate holder is a waiter that watches the directory, so a
// break frees the lock as it always did.
//
// The gate file is never deleted, for the reason a kernel lock file never
// is: a waiter that opened the old file would lock an inode without a name
// while a newcomer locks a fresh one. Nothing depends on the gate being
// unique, though: two gates only mean two local contenders, as without
// one.
//
// A gate that cannot be used (the filesystem refuses kernel locks, a file
// cannot be created or opened, say in a read-only directory or because
// something else sits at its path) is skipped: the acquisition runs
// ungated, exactly as without a gate. The gate alone never fails an
// acquisition. Where flock(2) is only local (some NFS mounts) it orders
// only this machine's waiters, which is all it is for.
const GateSuffix = ".gate"

// gateResult is the end of a gate wait run on its own goroutine.
type gateResult struct {
	h   core.Handle
	err error
}

// gateRequest is the request for the gate of a: the same owner, so the
// gate file names the process that is next in line for the lock.
func (a *attempt) gateRequest() *core.Request {
	return &core.Request{Path: a.path + GateSuffix, Owner: a.owner}
}

// tryGate takes the gate if it is free. busy reports a gate held by
// another local waiter; a nil handle without busy means the gate cannot
// be used and the caller goes on ungated.
//
// It asks the kernel lock alone, not the queue in front of it: a call that
// never waits has no place to keep in a queue, and the queue's own
// TryAcquire, finding waiters queued, probes the kernel lock to name its
// holder, which for that instant makes another TryAcquire of the gate
// fail: two racing TryAcquires on a free lock would then both answer busy.
func (a *attempt) tryGate() (g core.Handle, busy bool) {
	h, err := flock.Protocol{}.TryAcquire(a.gateRequest())
	if err == nil {
		return h, false
	}
	if errors.Is(err, core.ErrBusy) {
		a.logger("hold: waiting gate busy", "err", err)
		return nil, true
	}
	a.logger("hold: waiting gate unusable, going on without it", "err", err)
	return nil, false
}

// enterGate waits for the gate. It returns the gate, or a nil handle and
// nil error when the gate cannot be used (go on ungated), or the error
// that ends the acquisition: the caller's context, or the Patience/Ceiling
// rule, which must hold while a waiter sleeps here just as in the acquire
// loop (pol is the acquisition's one policy, shared with that loop).
func (a *attempt) enterGate(ctx context.Context, pol *policy) (core.Handle, error) {
	req := a.gateRequest()
	if pol.nextDeadline().IsZero() {
		// No patience rule: the caller's context is the only bound, and
		// the kernel lock's own wait observes it (and never leaves the
		// gate held by a wait it abandons).
		h, err := gateProto.Acquire(ctx, req)
		return a.gateEntered(ctx, h, err)
	}
	// With a patience rule the wait must be looked at on every window's
	// end, without giving up its place: one wait, on its own goroutine,
	// outlives the windows, and is abandoned (cancelled) only when the
	// rule ends the acquisition. Ending a kernel wait per window instead
	// would leave one abandoned wait, and its parked thread, behind for
	// every window.
	gctx, cancel := context.WithCancel(ctx)
	done := make(chan gateResult, 1)
	go func() {
		h, err := gateProto.Acquire(gctx, req)
		done <- gateResult{h, err}
	}()
	// The first window is measured against the lock as it is when this
	// waiter starts waiting, as in the loop.
	pol.noteWaiting()
	timer := time.NewTimer(time.Until(pol.nextDeadline()))
	defer timer.Stop()
	giveUp := func(err error) (core.Handle, error) {
		cancel()
		// The wait returns promptly once cancelled; a gate granted at the
		// last instant is handed straight on.
		go func() {
			if r := <-done; r.h != nil {
				r.h.Release()
			}
		}()
		return nil, err
	}
	for {
		select {
		case r := <-done:
			cancel()
			return a.gateEntered(ctx, r.h, r.err)
		case <-timer.C:
		}
		// The same checks, in the same order, as the loop's.
		if pol.ceilingReached() {
			return giveUp(a.timeout(ceilingBound(a.p.cfg)))
		}
		if pol.wedged() {
			return giveUp(a.timeout(patienceBound(a.p.cfg)))
		}
		timer.Reset(max(time.Until(pol.nextDeadline()), 0))
	}
}

// gateEntered sorts out how a gate wait ended.
func (a *attempt) gateEntered(ctx context.Context, h core.Handle, err error) (core.Handle, error) {
	if err == nil {
		return h, nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return nil, a.waitEnded(ctxErr)
	}
	a.logger("hold: waiting gate unusable, going on without it", "err", err)
	return nil, nil
}

// ceilingBound and patienceBound say which bound of the Patience/Ceiling
// rule ended a wait, in the words of its error.
func ceilingBound(c Config) string {
	return "waited " + c.Ceiling.String() + ", the ceiling, while the lock kept changing hands"
}

func patienceBound(c Config) string {
	return "the lock stayed with one holder for " + c.Patience.String() + " (patience)"
}
