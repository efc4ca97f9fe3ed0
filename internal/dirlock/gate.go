package dirlock

import (
	"context"
	"errors"
	"time"

	"github.com/hold-dev/hold/internal/core"
	"github.com/hold-dev/hold/internal/flock"
)

// GateSuffix names the waiting gate: "<lock path>.gate", a plain file
// beside the lock that only hold uses (Node tools never look at it).
//
// The problem it solves: every waiter on this machine is woken by every
// release, and they all race for the one mkdir; with tens of waiters the
// losers' mkdirs, stats and owner reads queue on the parent directory's
// lock in front of the winner's mkdir and stamp and the releaser's cleanup,
// and hand-offs got slower than proper-lockfile's.
//
// The gate is a kernel lock (package flock) on that file. Among the
// waiters of this machine, only the one holding the gate runs the acquire
// loop; the others sleep in the kernel, which wakes them one at a time
// and frees the gate of a process that dies. The directory remains the
// lock: the gate holder still contends, by mkdir, with other hosts, Node
// tools and hold processes that could not use the gate, and every rule of
// the loop (judging, reclaim, read-back) applies unchanged.
//
// The gate is held while waiting, not while holding: the winner of the
// directory lets go of the gate at once, so the next local waiter already
// watches the directory (inotify) while the lock is held, and takes it the
// moment it is released. Holding the gate for the whole hold was the other
// choice, and it is worse on both counts:
//   - speed: a releaser that at once asks again (a worker loop) is on CPU
//     when it frees the gate, and takes it back before the woken waiter
//     even runs, so the lock stays with one process instead of being
//     handed on. Here the gate is normally held by the next waiter when a
//     holder releases, so the releaser queues behind it.
//   - correctness: `hold break` of a hung holder's lock removes the
//     directory, but a gate held by the hung process would keep every
//     local waiter asleep behind it. Here the gate holder is a waiter that
//     watches the directory, so a break frees the lock as it always did.
//
// The gate file is never deleted, for the reason a kernel lock file never
// is: a waiter that opened the old file would lock an inode without a name
// while a newcomer locks a fresh one, and two gates would be open at once.
// Nothing depends on it being unique, though: two gates only mean two
// local contenders, as without a gate.
//
// A gate that cannot be used (the filesystem refuses kernel locks, the
// file cannot be created or opened, say in a read-only directory or
// because something else sits at its path) is skipped: the acquisition
// runs ungated, exactly as without a gate. The gate alone never fails an
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
func (a *attempt) tryGate() (g core.Handle, busy bool) {
	h, err := flock.Protocol{}.TryAcquire(a.gateRequest())
	if err == nil {
		return h, false
	}
	if errors.Is(err, core.ErrBusy) {
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
		h, err := flock.Protocol{}.Acquire(ctx, req)
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
		h, err := flock.Protocol{}.Acquire(gctx, req)
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
