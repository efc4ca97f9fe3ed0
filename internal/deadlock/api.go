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
// For a lock of this machine, where ancestors can be told (Linux), it
// always should: a free lock is then taken by the try, and nothing that
// only a busy lock needs (the walk up this process's ancestors, which
// reads two files of each) is looked at. Elsewhere, and for a lock on a
// server (where a try is a round trip), only when a deadlock is possible:
// FailIfHeldHere with a lock held here, FailIfHeldBy, a caller's kept
// locks, or an ancestor that runs this process under a lock. A process
// that says FailIfHeldHere of itself (the hold command) and holds nothing
// then waits at once.
func (c *Config) TryFirst() bool {
	if len(c.HeldBy) > 0 || len(c.CallerKeeps) > 0 {
		return true
	}
	if _, network := c.Protocol.(lock.Closer); ancestorsKnown && !network {
		return true
	}
	if len(runners()) > 0 {
		return true
	}
	if !c.HeldHere {
		return false
	}
	heldHere.Lock()
	n := heldHere.n
	heldHere.Unlock()
	return n > 0
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
// ancestors can be told.
func (c *Config) SlotTryFirst() bool {
	return ancestorsKnown && c.Protocol.Name() == "flock"
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
