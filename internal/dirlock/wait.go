package dirlock

import (
	"context"
	"math/rand/v2"
	"runtime"
	"time"
)

// minPoll is where the backoff starts: the first retry after a busy
// attempt comes soon, later ones back off towards MaxPoll.
const minPoll = time.Millisecond

// waiter sleeps between attempts of one acquisition. It wakes early when
// the lock path is reported removed or renamed (removals: inotify on Linux,
// ReadDirectoryChangesW on Windows), and otherwise after a jittered
// exponential backoff capped at MaxPoll, the fallback where no events
// arrive (network filesystems). Jitter, because a fixed retry wakes every
// waiter at the same instant to re-race, and with N waiters serving all of
// them then takes about N·H(N) rounds.
type waiter struct {
	removals removals       // nil: backoff only
	blocking *blockingWatch // instead of removals, for a context that cannot end
	next     time.Duration
	maxPoll  time.Duration
}

// removals is a subscription to the removal (or renaming away) of one
// lock path. C receives, without blocking the sender, after such an event;
// a signal may be spurious (an overflowed event queue, a watch that
// ended), never missing while the subscription lasts.
type removals interface {
	C() <-chan struct{}
	close()
}

// eventsWork says where directory events are used. kqueue (macOS, BSD)
// watches a directory by opening every file in it, far too costly for a
// lock's parent directory; there the backoff alone serves.
const eventsWork = runtime.GOOS == "linux" || runtime.GOOS == "windows"

// newWaiter subscribes to the removal of path before returning, so that a
// release after the caller's next look is never missed.
// A waiter whose context cannot end (block) sleeps in blocking system
// calls on a watch of its own where there is one (see blockingWatch).
func (p *Protocol) newWaiter(path string, maxPoll time.Duration, block bool) *waiter {
	w := &waiter{next: minPoll, maxPoll: maxPoll}
	if block {
		w.blocking = p.newBlockingWatch(path)
	}
	if w.blocking == nil {
		w.removals = p.watchRemovals(path)
	}
	return w
}

// newSlotWaiter is newWaiter for a semaphore's waiter: it wakes when any
// of paths (the slots, all in one directory) is removed or renamed away.
// It never sleeps in blocking system calls.
func (p *Protocol) newSlotWaiter(paths []string, maxPoll time.Duration) *waiter {
	return &waiter{next: minPoll, maxPoll: maxPoll, removals: p.watchRemovalsOf(paths)}
}

func (w *waiter) close() {
	if w == nil {
		return
	}
	if w.removals != nil {
		w.removals.close()
	}
	if w.blocking != nil {
		w.blocking.close()
	}
}

// backoff returns the next jittered sleep, never past until (the nearest
// deadline the loop can end on: sleeping past it would observe the
// caller's bound only whenever the sleep happened to end). A zero until
// means no deadline.
func (w *waiter) backoff(until time.Time) time.Duration {
	d := time.Duration(float64(w.next) * (0.5 + rand.Float64()))
	w.next = min(2*w.next, w.maxPoll)
	if !until.IsZero() {
		d = min(d, time.Until(until))
	}
	return max(d, 0)
}

// sleep waits up to d, or until the lock path is removed or renamed, or
// ctx ends (returning its error). byEvent reports a wake by the lock's
// removal.
func (w *waiter) sleep(ctx context.Context, d time.Duration) (byEvent bool, err error) {
	if w.blocking != nil {
		return w.blocking.wait(d), nil
	}
	var removed <-chan struct{}
	if w.removals != nil {
		removed = w.removals.C()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-timer.C:
		return false, nil
	case <-removed:
		return true, nil
	}
}

// policy is the seed's timeout rule. The caller's context is the hard
// bound. On top of it, Patience gives up on a holder that keeps the lock
// for a whole window, but re-arms the window whenever the lock changed
// hands, so a waiter on a briskly handed-round lock is not killed for bad
// luck; and because re-arming alone never terminates, Ceiling bounds the
// whole wait.
type policy struct {
	path      string
	patience  time.Duration
	ceiling   time.Time // zero: none
	window    time.Time // end of the current patience window; zero: none
	last      fingerprint
	sampled   bool
	startedAt time.Time
	// look takes the fingerprint of who holds the lock now: of the lock
	// path, or of a semaphore's slots (semaphore.go).
	look func() fingerprint
}

func newPolicy(path string, cfg Config, start time.Time) *policy {
	p := &policy{path: path, patience: cfg.Patience, startedAt: start}
	p.look = func() fingerprint { return takeFingerprint(path) }
	if cfg.Ceiling > 0 {
		p.ceiling = start.Add(cfg.Ceiling)
	}
	if cfg.Patience > 0 {
		p.window = start.Add(cfg.Patience)
	}
	return p
}

// noteWaiting samples the lock the caller starts waiting on, at the first
// busy attempt, so the first window is measured against it (not against
// nothing, which would always look like progress). Without a patience
// rule there is no window, and nothing to sample.
func (p *policy) noteWaiting() {
	if !p.sampled && !p.window.IsZero() {
		p.sampled = true
		p.last = p.look()
	}
}

// ceilingReached is checked first on every pass, on its own: a bound that
// holds only when another bound happens to fire is not a bound.
func (p *policy) ceilingReached() bool {
	return !p.ceiling.IsZero() && time.Now().After(p.ceiling)
}

// wedged reports whether the patience window expired with the lock in the
// same hands all along. A window in which the fingerprint moved re-arms.
// A lock that was free or unobservable at the instant of looking is no
// evidence of a wedged holder.
func (p *policy) wedged() bool {
	if p.window.IsZero() || !time.Now().After(p.window) {
		return false
	}
	fp := p.look()
	if fp.fi != nil && fp.same(p.last) {
		return true
	}
	p.last = fp
	p.window = time.Now().Add(p.patience)
	return false
}

// nextDeadline is the nearest moment the loop must look again: the
// ceiling or the end of the patience window.
func (p *policy) nextDeadline() time.Time {
	switch {
	case p.ceiling.IsZero():
		return p.window
	case p.window.IsZero() || p.ceiling.Before(p.window):
		return p.ceiling
	}
	return p.window
}
