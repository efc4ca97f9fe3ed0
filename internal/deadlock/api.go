// Package deadlock finds the waits for a lock that can never end, for the
// root package hold: a wait for a lock this process (or its caller) keeps
// itself (held.go), for one kept by ancestors that wait for this process
// to end (ancestor.go), for a kernel lock this process was started with
// (inheritedDeadlock), and cycles of waits between processes, on this
// machine (cycle.go) or on a server (remote.go).
//
// The root calls it through a narrow interface: a Held in each of its
// Locks (what this process holds), a Config in each request's options
// (what a wait keeps, and how long before it searches), a Watched request
// that carries the search's watch to the protocol (lock.Request.Watch),
// and the verdicts, errors that match lock.ErrDeadlock.
package deadlock

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// Held is one lock this process holds, as the checks see it: the root's
// Lock keeps one, which Note puts in the table of the locks held here and
// Forget takes out.
type Held struct {
	h     lock.Handle
	path  string
	proto string
	// own is the file a target named "*.lock" is locked as too, "" for
	// none.
	own string
	// shared: held shared (a slot holder's lock file too); network: its
	// protocol keeps locks on a server; released: Forget was called.
	shared   bool
	network  bool
	released atomic.Bool
	// prev and next link the table, guarded by heldHere.
	prev, next *Held
}

// Config is what the deadlock checks of one request need from its
// options: the protocol, what the wait keeps, and how long it waits before
// it searches for a cycle. The root's config keeps one.
type Config struct {
	// Protocol is the request's protocol (the fair queue's in front of
	// one, with Fair).
	Protocol lock.Protocol
	// HeldHere: nothing in this process can release a lock while the
	// wait lasts (hold.FailIfHeldHere).
	HeldHere bool
	// Fair: the request waits in the fair queue (hold.Fair).
	Fair bool
	// HeldBy: the caller keeps these while it waits (hold.FailIfHeldBy).
	HeldBy []*Held
	// Caller is the program this process asks for (proc.WithCaller on
	// the context of the wait), 0 for none.
	Caller int
	// CallerKeeps: the kernel locks the caller holds in its own process
	// and keeps while the wait lasts (proc.WithCallerKeeps).
	CallerKeeps []proc.HeldFile
	// After is how long a wait lasts before it looks for a deadlock
	// between processes (hold.DeadlockAfter); 0 for the default,
	// negative for never.
	After time.Duration
	// watch is the watch of the request made last (Watch), which Wait
	// gives the protocol.
	watch *cycleWatch
}

// Watched is a request together with its deadlock watch, so that the
// watch costs no allocation of its own: an acquisition that never waits
// never touches it. The root makes each request as one.
type Watched struct {
	lock.Request
	watch cycleWatch
}

// Kept is the context Do gives fn (through its cancellation): it names
// the lock that fn runs under (Held), for the waits fn makes with it. The
// root's Lock keeps one, so that Do makes no allocation for it.
type Kept struct {
	context.Context
	Held *Held
}

// keptKey is the key under which a Kept answers for itself.
type keptKey struct{}

// Value returns k itself for keptKey, and the parent's value otherwise.
func (k *Kept) Value(key any) any {
	if _, ok := key.(keptKey); ok {
		return k
	}
	return k.Context.Value(key)
}

// ancestorsKnown says whether a process's ancestors and their waits can be
// told here (Linux): elsewhere the ancestor check has nothing to go on.
const ancestorsKnown = runtime.GOOS == "linux"

// TryFirst reports whether a wait of this config's should begin with a
// try, so that a busy lock is asked (Busy) whether it can ever be had
// before the wait: only a busy lock can be a deadlock, and only the
// busy error names who holds it.
//
// It should when a deadlock is possible: FailIfHeldBy, a caller's kept
// locks, FailIfHeldHere with a lock held here, or an ancestor that runs
// this process under a lock. Knowing the last means a walk up this
// process's ancestors (two files of each), made once per process: a
// program that takes many locks pays it once, but the hold command takes
// one. So a request with FailIfHeldHere (the hold command, the agent's
// synchronous waits) for a lock of this machine, where ancestors can be
// told (Linux), always tries first: a free lock is then taken with no
// walk, and the walk is made only once the try found it busy. Not a fair
// request (a try there takes a place in the queue, and a busy one looks
// for the waiter at its front), nor a lock on a server (a try is a round
// trip): those walk first, as before.
func (c *Config) TryFirst() bool {
	if len(c.HeldBy) > 0 || len(c.CallerKeeps) > 0 {
		return true
	}
	if c.HeldHere && c.localTry() {
		return true
	}
	return len(runners()) > 0 || c.HeldHere && holdsAny()
}

// localTry reports whether a try is the cheap first step of a wait here:
// a lock of this machine, not in the fair queue, where ancestors can be
// told.
func (c *Config) localTry() bool {
	_, network := c.Protocol.(lock.Closer)
	return ancestorsKnown && !network && !c.Fair
}

// Busy returns the ErrDeadlock error for req when its try found the lock
// busy (busy, the try's error: an ErrBusy error naming the holder) and
// the wait could never end: the lock is kept by this process or its
// caller itself (FailIfHeldHere, FailIfHeldBy), or only by ancestors that
// wait for this process to end. nil otherwise: wait (Wait).
func (c *Config) Busy(req *lock.Request, busy error) error {
	if busy == nil || !errors.Is(busy, lock.ErrBusy) {
		return nil
	}
	if err := c.selfDeadlock(req, busy); err != nil {
		return err
	}
	return c.ancestorDeadlock(req, busy)
}

// Wait is the protocol's Acquire of req, watched: the request carries
// the watch that Watch prepared (lock.Request.Watch), which searches for
// a cycle once the wait lasts After; a process run under a lock by an
// ancestor asks the ancestor check again while it waits. A wait that
// can never end fails with its ErrDeadlock error.
func (c *Config) Wait(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	if c.watch != nil {
		req.Watch = c.watch
	}
	h, err := c.waitWatchingAncestors(ctx, req)
	return h, endWatch(req, err)
}

// SlotTryFirst is TryFirst for a wait for a slot of a semaphore: only a
// kernel semaphore's slots can be told kept by ancestors, and only where
// ancestors can be told. The hold command (HeldHere) tries first without
// the walk, as TryFirst says; others walk first, once per process.
func (c *Config) SlotTryFirst() bool {
	if !ancestorsKnown || c.Protocol.Name() != "flock" {
		return false
	}
	return c.HeldHere || len(runners()) > 0
}

// SlotBusy is Busy for a wait for a slot of the kernel semaphore req names
// (Slots above 1), whose try found none free (busy: the try's error): the
// ErrDeadlock error when every slot, or the lock file itself, is kept by
// ancestors that wait for this process to end; nil otherwise.
func (c *Config) SlotBusy(req *lock.Request, busy error) error {
	if busy == nil {
		return nil
	}
	return c.slotAncestorDeadlock(req, busy)
}

// WaitSlot is Wait for a slot of the semaphore sem: the ancestor check is
// made again while it waits.
func (c *Config) WaitSlot(ctx context.Context, sem lock.Semaphore, req *lock.Request) (lock.Handle, error) {
	return c.acquireSlotWatching(ctx, sem, req)
}
