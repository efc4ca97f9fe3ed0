package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/lock"
)

// The lock table: taking a lock for the client, filing it under a number,
// and releasing or checking it by that number.

// heldLock is a lock the client holds: one of this agent's, or one that
// the sub-agent holds for it (remote != 0, the sub-agent's number).
type heldLock struct {
	l    *hold.Lock
	spec lockspec.Resolved
	// stopWatch stops the loss watch (see watchLoss); released says the
	// lock was released, so that a watch begun afterwards stops at once.
	watchMu   sync.Mutex
	stopWatch func() bool
	released  bool
	// remote is the sub-agent's number for a lock it holds, and sub the
	// sub-agent; zero and nil for this agent's own locks.
	remote uint64
	sub    *subAgent
	// lazy: the client asked for the lock without its token and record
	// (request.Lazy); it asks for them with a token request.
	lazy bool
	// inproc: the client asked for a recipe (request.InProc).
	inproc bool
	// lostAt is when the agent heard that the lock was lost, on the
	// monotonic clock of request.Sent; 0 while it has not.
	lostAt atomic.Int64
}

// acquire serves acquire and try on the standard channel: the first
// attempt at once, on the reading goroutine (a free lock is then answered
// without waking another thread, which on a busy machine costs more than
// the lock itself); only a wait gets its own goroutine.
func (a *agent) acquire(req *request) {
	r, after, wait := a.attempt(req)
	if wait != nil {
		a.spawn(req.ID, wait)
		return
	}
	if r != nil {
		a.send(r)
	}
	if after != nil {
		after()
	}
}

// attempt is the one place that decides whether an acquisition is tried
// before it waits, for both channels: a request that must not wait is
// tried; any other is tried unless its lock was found busy within
// busyMemory (the try would most likely fail again, having read and
// judged the holder's record for nothing). It returns the final reply
// (nil if the client left meanwhile) and what to run once it is sent, as
// grant does; or, when the request must wait, wait, the wait to run in a
// goroutine of its own (spawn), which sends its reply itself.
func (a *agent) attempt(req *request) (r *reply, after func(), wait func(context.Context)) {
	al, err := req.newLock()
	if err != nil {
		return replyTo(req.ID, err), nil, nil
	}
	spec := &al.spec
	a.failIfHeldBy(req, spec)
	if spec.Nonblock || !a.recentlyBusy(spec) {
		l, err := a.try(spec)
		if err == nil || spec.Nonblock || !errors.Is(err, hold.ErrBusy) {
			r, after = a.grant(req.ID, al, l, err)
			return r, after, nil
		}
	}
	return nil, nil, func(ctx context.Context) {
		l, err := spec.Acquire(ctx, nil)
		a.granted(req.ID, al, l, abortCause(ctx, err))
	}
}

// busyMemory is how long a lock found busy is assumed to stay busy: an
// acquire of it within that time skips the first attempt, which would
// read and judge the holder's record only to be thrown away.
const busyMemory = 100 * time.Millisecond

// maxBusyMemory bounds the busy memory; it is emptied when full.
const maxBusyMemory = 1024

// recentlyBusy reports whether spec's lock was found busy within busyMemory.
func (a *agent) recentlyBusy(spec *lockspec.Resolved) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.busy[spec.Key]
	return ok && time.Since(t) < busyMemory
}

// try makes one attempt at spec's lock, without waiting, and remembers
// when it was busy.
func (a *agent) try(spec *lockspec.Resolved) (*hold.Lock, error) {
	l, err := hold.TryAcquire(spec.Target, spec.Opts...)
	if errors.Is(err, hold.ErrBusy) {
		a.markBusy(spec)
	}
	return l, err
}

func (a *agent) markBusy(spec *lockspec.Resolved) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.busy) >= maxBusyMemory {
		clear(a.busy)
	}
	a.busy[spec.Key] = time.Now()
}

// granted answers an acquisition: the lock l, or the error that kept it.
func (a *agent) granted(id json.RawMessage, al *heldLock, l *hold.Lock, err error) {
	r, watch := a.grant(id, al, l, err)
	if r != nil {
		a.send(r)
	}
	if watch != nil {
		watch()
	}
}

// grant files the lock l under a new number and returns the reply that
// says so, or the error reply when err is set. watch, when not nil, is to
// be called once the reply is sent: it starts watching the lock for its
// loss, so that the client never hears of a loss before the lock itself.
// The reply is nil when the client left meanwhile (l is then released).
func (a *agent) grant(id json.RawMessage, al *heldLock, l *hold.Lock, err error) (r *reply, watch func()) {
	if err != nil {
		al.spec.Close()
		return replyTo(id, err), nil
	}
	al.l = l
	n, ok := a.addLock(al)
	if !ok { // the client left while we waited
		l.Release()
		al.spec.Close()
		return nil, nil
	}
	if al.lazy {
		return &reply{ID: id, OK: true, Lock: n, Path: l.Path(), Protocol: l.Protocol(), Slot: l.Slot(), ReleaseAhead: releaseAhead(l),
				Recipe: recipe(al, l)},
			func() { a.watchLoss(n, al) }
	}
	return lockReply(id, n, l), func() { a.watchLoss(n, al) }
}

// abortCause makes a wait ended by a cancel request or by the client's
// departure say so.
func abortCause(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.DeadlineExceeded) && errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w (%v)", err, cause)
	}
	return err
}

func lockReply(id json.RawMessage, n uint64, l *hold.Lock) *reply {
	owner := l.Owner()
	return &reply{ID: id, OK: true, Lock: n, Token: l.Token(), Path: l.Path(), Protocol: l.Protocol(),
		Slot: l.Slot(), ReleaseAhead: releaseAhead(l), Owner: &owner}
}

// releaseAhead says whether a client may write l's release without
// waiting for its reply (reply.ReleaseAhead), where the client's monotonic
// clock is the agent's (monoNow), so that the release can say when the
// client let go (request.Sent). The lock is asked what it is, not its
// protocol's name: one that belongs to an open file (Lock.File, a kernel
// lock, fair or not, a semaphore's slot too) is released by closing that
// file, which leaves nothing behind and is answered at once.
func releaseAhead(l *hold.Lock) bool { return monoClock && l.File() != nil }

// addLock files a lock under a new number; false if the agent is closing.
func (a *agent) addLock(al *heldLock) (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return 0, false
	}
	a.next++
	a.locks[a.next] = al
	return a.next, true
}

// takeLock removes lock n from the table for its release.
func (a *agent) takeLock(n uint64) *heldLock {
	a.mu.Lock()
	defer a.mu.Unlock()
	al := a.locks[n]
	delete(a.locks, n)
	return al
}

func (a *agent) lookupLock(n uint64) *heldLock {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.locks[n]
}

func noLock(n uint64) *replyError {
	return &replyError{Code: codeNoLock, Message: fmt.Sprintf("no lock %d: never acquired, or already released", n)}
}

func (a *agent) release(req *request) {
	al := a.takeLock(req.Lock)
	if al == nil {
		a.refuse(req.ID, noLock(req.Lock))
		return
	}
	if al.remote != 0 {
		a.forwardRelease(req, al)
		return
	}
	a.answer(req.ID, al.release(req.Sent))
}

// lostBefore says whether the agent heard of al's loss before sent (on
// the monotonic clock of request.Sent). A loss the library found but whose
// news has not reached the agent yet was found a moment ago: after.
func (al *heldLock) lostBefore(sent int64) bool {
	at := al.lostAt.Load()
	return at != 0 && at <= sent
}

// release gives up one of the agent's own locks, already taken out of
// the table. sent is when a client that wrote the release ahead let go
// (request.Sent), 0 for a release it waits for.
func (al *heldLock) release(sent int64) error {
	al.stopWatching()
	err := al.l.Release()
	al.spec.Close()
	if sent > 0 && errors.Is(err, lock.ErrLost) && !al.lostBefore(sent) {
		// A release written ahead (releaseAhead): the client's hold ended
		// when it sent the release, and the loss was heard of only after,
		// when the client may have removed the lock file itself, as
		// filelock's users do. A waited release would not have reported it
		// either: it reports the losses found while the lock was held.
		return nil
	}
	return err
}

// check serves check and token.
func (a *agent) check(req *request) {
	al := a.lookupLock(req.Lock)
	switch {
	case al == nil:
		a.refuse(req.ID, noLock(req.Lock))
	case al.remote != 0:
		a.forwardLockOp(req, al)
	case req.Op == "token":
		a.send(tokenReply(req.ID, al.l))
	default:
		a.answer(req.ID, al.l.Check())
	}
}

// tokenReply answers a token request: the lock's token and owner record,
// which the library writes first if it has not yet (a token is only ever
// handed out with the record that makes the next one larger).
func tokenReply(id json.RawMessage, l *hold.Lock) *reply {
	owner := l.Owner()
	return &reply{ID: id, OK: true, Token: l.Token(), Owner: &owner}
}

// failIfHeldBy adds to spec the locks the request says its caller holds
// and will not release while it waits (held_by): a wait for one of them
// is a deadlock (hold.FailIfHeldBy). Numbers of no lock of this agent's
// are ignored: they hold nothing here.
func (a *agent) failIfHeldBy(req *request, spec *lockspec.Resolved) {
	if len(req.HeldBy) == 0 {
		return
	}
	var ls []*hold.Lock
	a.mu.Lock()
	for _, n := range req.HeldBy {
		if al := a.locks[n]; al != nil && al.l != nil {
			ls = append(ls, al.l)
		}
	}
	a.mu.Unlock()
	if len(ls) > 0 {
		spec.Opts = append(spec.Opts, hold.FailIfHeldBy(ls...))
	}
}
