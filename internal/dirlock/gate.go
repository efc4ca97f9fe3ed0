package dirlock

import (
	"context"
	"errors"
	"time"

	"github.com/hold-dev/hold/lock"
)

// The gate. Without it every local waiter is woken by every release, and
// all race for the one mkdir: with tens of waiters the losers' mkdirs,
// stats and owner reads queue on the parent directory's lock in front of
// the winner's mkdir and stamp and the releaser's cleanup, and hand-offs
// get slower than proper-lockfile's.
//
// The gate is package fairq's queue with no lock behind it (fairq.Front):
// among the waiters of this machine, only the one at the front of the
// queue runs the acquire loop; the others sleep in the kernel, each on the
// place of the one before it. The kernel drops the place of a process
// that dies. The directory remains the lock: the waiter at the front still
// contends, by mkdir, with other hosts, Node tools and hold processes that
// could not use the gate, and every rule of the loop (judging, reclaim,
// read-back) applies unchanged.
//
// The winner keeps its place at the front while it holds the lock, and
// gives it up the moment the lock path is free (release moves the
// directory aside first), or when its lock is found lost. So a release
// wakes exactly one process, the next local waiter, which finds the path
// free and takes it with one mkdir. Each hand-off between local waiters
// is that one wake-up.
//
// Why a queue and not a kernel lock: a kernel lock hands nothing over; it
// wakes a waiter and lets it try again, so a holder that releases the
// directory and asks again at once (any worker loop) finds the gate free,
// because the waiter the kernel woke has not run yet, and the lock goes
// round one process. The queue puts that holder behind everyone already
// waiting.
//
// `hold break` still frees the lock for local waiters: the holder's
// heartbeat finds its directory gone within one beat and gives up its
// place, as it does whenever its lock is lost. A holder whose process is
// frozen as a whole (stopped, or wedged so that not even its heartbeat
// runs) keeps its place until it dies, and the local waiters behind it
// wait that long; waiters on other machines and Node tools, which do not
// use the gate, take the broken lock at once.
//
// The queue is never deleted, for the reason a kernel lock file never is:
// a waiter that opened the old one would queue on an inode without a name
// while a newcomer queues on a fresh one. Nothing depends on the gate
// being unique, though: two gates only mean two local contenders, as
// without one.
//
// A gate that cannot be used (the filesystem refuses kernel locks, the
// queue cannot be created or opened, say in a read-only directory or
// because something else sits at its path) is skipped: the acquisition
// runs ungated, exactly as without a gate. The gate alone never fails an
// acquisition. Where kernel locks are only local (some NFS mounts) it
// orders only this machine's waiters, which is all it is for.

// GateSuffix names the waiting gate: "<lock path>.gate", the path the
// gate's queue is named after. On Linux the gate is the queue file
// "<lock path>.gate.queue"; on other unix systems the queue directory
// "<lock path>.gate.q"; on Windows, where there is no queue, the file
// "<lock path>.gate" with a kernel lock on it. Only hold uses them (Node
// tools never look).
const GateSuffix = ".gate"

// gateResult is the end of a gate wait run on its own goroutine.
type gateResult struct {
	leave func()
	err   error
}

// gateRequest is the request for the gate of a: the same owner, so the
// gate file names the process that is next in line for the lock.
func (a *attempt) gateRequest() *lock.Request {
	return &lock.Request{Path: a.path + GateSuffix, Owner: a.owner}
}

// tryGate takes the gate if nobody is queued at it. busy reports a
// waiter ahead; a nil leave without busy means the gate cannot be used and
// the caller goes on ungated.
func (a *attempt) tryGate() (leave func(), busy bool) {
	leave, err := openGate(context.Background(), a.gateRequest(), false)
	if err == nil {
		return leave, false
	}
	if errors.Is(err, lock.ErrBusy) {
		a.logger("hold: waiting gate busy", "err", err)
		return nil, true
	}
	a.logger("hold: waiting gate unusable, going on without it", "err", err)
	return nil, false
}

// enterGate waits for the gate. It returns the function that lets go of
// it, or nil and a nil error when the gate cannot be used (go on ungated),
// or the error
// that ends the acquisition: the caller's context, or the Patience/Ceiling
// rule, which must hold while a waiter sleeps here just as in the acquire
// loop (pol is the acquisition's one policy, shared with that loop).
func (a *attempt) enterGate(ctx context.Context, pol *policy) (func(), error) {
	req := a.gateRequest()
	if pol.nextDeadline().IsZero() {
		// No patience rule: the caller's context is the only bound, and
		// the queue's own wait observes it (and never leaves a place
		// queued for a wait it abandons).
		leave, err := openGate(ctx, req, true)
		return a.gateEntered(ctx, leave, err)
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
		leave, err := openGate(gctx, req, true)
		done <- gateResult{leave, err}
	}()
	// The first window is measured against the lock as it is when this
	// waiter starts waiting, as in the loop.
	pol.noteWaiting()
	timer := time.NewTimer(time.Until(pol.nextDeadline()))
	defer timer.Stop()
	giveUp := func(err error) (func(), error) {
		cancel()
		// The wait returns promptly once cancelled; a gate granted at the
		// last instant is handed straight on.
		go func() {
			if r := <-done; r.leave != nil {
				r.leave()
			}
		}()
		return nil, err
	}
	for {
		select {
		case r := <-done:
			cancel()
			return a.gateEntered(ctx, r.leave, r.err)
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
func (a *attempt) gateEntered(ctx context.Context, leave func(), err error) (func(), error) {
	if err == nil {
		return leave, nil
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
