package hold

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// Deadlocks of a caller with itself. A wait for a lock that this process
// holds may be legitimate: another goroutine (or another task of an event
// loop) holds it and will release it. So hold cannot call it a deadlock
// by itself; only the caller knows that nothing of its own can release the
// lock while it waits (a synchronous client whose only thread is blocked in
// the wait, like the agent's synchronous channel). FailIfHeldHere says so,
// and the wait then ends at once with ErrDeadlock instead of never.
//
// To know what this process holds, every Lock taken through this package
// is in one table until its Release. Its locks are compared by the lock
// itself (lockID), never by the spelling of the path; that identity is
// found at the first question (a busy wait with FailIfHeldHere or
// FailIfHeldBy), so that taking a lock costs no more for it.

// The table is a list threaded through the Locks themselves (heldPrev,
// heldNext), not a map: a Lock goes in and out of it on every cycle, and
// linking costs neither a hash nor a bucket's memory, which a map did on
// both the acquisition and the release.
var heldHere struct {
	sync.Mutex
	head *Lock
	n    int
}

// heldLocks returns the locks in the table. Called with heldHere held.
func heldLocks() []*Lock {
	ls := make([]*Lock, 0, heldHere.n)
	for l := heldHere.head; l != nil; l = l.heldNext {
		ls = append(ls, l)
	}
	return ls
}

// noteHeld puts l, a lock of protocol p, in the table; its Release takes
// it out (forgetHeld).
func noteHeld(l *Lock, p Protocol, shared bool) {
	_, l.network = p.(lock.Closer)
	l.sharedHold = shared
	heldHere.Lock()
	l.heldNext = heldHere.head
	if l.heldNext != nil {
		l.heldNext.heldPrev = l
	}
	heldHere.head = l
	heldHere.n++
	heldHere.Unlock()
}

// forgetHeld takes l out of the table, once: the call that marks l
// released does (a sync.Once would cost every cycle its slow path, since
// every Lock's is new).
func forgetHeld(l *Lock) {
	if !l.released.CompareAndSwap(false, true) {
		return
	}
	heldHere.Lock()
	if l.heldPrev != nil {
		l.heldPrev.heldNext = l.heldNext
	} else {
		heldHere.head = l.heldNext
	}
	if l.heldNext != nil {
		l.heldNext.heldPrev = l.heldPrev
	}
	l.heldPrev, l.heldNext = nil, nil
	heldHere.n--
	heldHere.Unlock()
}

// conflicts reports whether l, still held, is the lock id in a mode that
// excludes a request that is shared or not: its own lock, or the kernel
// lock of the file a target named "*.lock" is locked as too (Lock.own).
// l's identity is read from its paths, which name the files l holds as
// long as Check passes (a kernel lock's Check is one stat of the path):
// the lock is asked which it is only here, on a busy wait's question, so
// that taking one costs nothing more for it.
func (l *Lock) conflicts(id lockID, shared bool) bool {
	if l.released.Load() || l.sharedHold && shared {
		return false
	}
	switch {
	case l.proto == id.proto && l.network:
		return idOf(l.proto, true, l.path) == id
	case l.proto == id.proto && idOf(l.proto, false, l.path) == id,
		id.proto == "flock" && l.own != "" && fileLockID("flock", l.own) == id:
		return l.h.Check() == nil
	}
	return false
}

// heldConflict reports whether this process holds the lock id in a mode
// that excludes a request that is shared or not.
func heldConflict(id lockID, shared bool) bool {
	heldHere.Lock()
	ls := heldLocks()
	heldHere.Unlock()
	for _, l := range ls {
		if l.conflicts(id, shared) {
			return true
		}
	}
	return false
}

// mayDeadlock reports whether a wait of this config's could be one that
// never ends, which only a try before it can tell (selfDeadlock,
// ancestorDeadlock): FailIfHeldHere with a lock held here, FailIfHeldBy,
// or an ancestor that runs this process under a lock. A process that
// says FailIfHeldHere of itself (the hold command) and holds nothing
// waits at once.
func (c *config) mayDeadlock() bool {
	if len(c.heldBy) > 0 || len(c.callerKeeps) > 0 || len(runners()) > 0 {
		return true
	}
	if !c.failIfHeldHere {
		return false
	}
	heldHere.Lock()
	n := heldHere.n
	heldHere.Unlock()
	return n > 0
}

// selfDeadlock returns the ErrDeadlock error for a request that found
// its lock busy (busy, the ErrBusy error, names the holder) when this
// process holds it itself and the caller said it cannot release it while
// it waits; nil otherwise.
func (c *config) selfDeadlock(req *Request, busy error) error {
	if !errors.Is(busy, ErrBusy) {
		return nil
	}
	var hint string
	_, network := c.protocol.(lock.Closer)
	id := idOf(c.protocol.Name(), network, req.Path)
	switch {
	case c.heldByConflict(id, req) || c.callerKeepsConflict(id):
		hint = fmt.Sprintf("the holder is the caller itself (%s, a lock it holds and will not release while it waits): release it first, or take it once and pass it on", c.whoAsks())
	case c.failIfHeldHere && heldConflict(id, req.Shared):
		hint = fmt.Sprintf("the holder is this very process (%s), which cannot release it while this call waits: release it first, or take it once and pass it on", c.whoAsks())
	default:
		return nil
	}
	e := &Error{Op: "acquire", Path: req.Path, Err: ErrDeadlock, Hint: hint}
	var be *Error
	if errors.As(busy, &be) {
		e.Holder = be.Holder
	}
	return e
}

// whoAsks names the process a deadlock is of, for messages: this
// process, or the program it serves (proc.WithCaller) and this one.
func (c *config) whoAsks() string {
	if c.caller > 0 && c.caller != os.Getpid() {
		return fmt.Sprintf("pid %d, through %s pid %d", c.caller, filepath.Base(os.Args[0]), os.Getpid())
	}
	return fmt.Sprintf("pid %d", os.Getpid())
}

// callerKeepsConflict reports whether id is one of the kernel locks the
// caller holds in its own process (proc.WithCallerKeeps): held
// exclusively, so any request for it conflicts.
func (c *config) callerKeepsConflict(id lockID) bool {
	return id.proto == "flock" && slices.Contains(callerKeptIDs(c.callerKeeps), id.id)
}

// callerKeptIDs are the lock identities (lockID.id) of the kernel locks
// the caller holds in its own process.
func callerKeptIDs(files []proc.HeldFile) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = fileKeyID(f.Dev, f.Ino)
	}
	return out
}

// heldByConflict reports whether one of the locks given to FailIfHeldBy
// holds req's lock in a conflicting mode.
func (c *config) heldByConflict(id lockID, req *Request) bool {
	for _, l := range c.heldBy {
		if l != nil && l.conflicts(id, req.Shared) {
			return true
		}
	}
	return false
}
