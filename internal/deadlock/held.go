package deadlock

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
// and the wait then ends at once with lock.ErrDeadlock instead of never.
//
// To know what this process holds, every Lock taken through the root
// package is in one table (its Held) until its Release. Its locks are compared by the lock
// itself (lockID), never by the spelling of the path; that identity is
// found at the first question (a busy wait with FailIfHeldHere or
// FailIfHeldBy), so that taking a lock costs no more for it.

// The table is a list threaded through the Locks themselves (their
// Held's prev and next), not a map: a Lock goes in and out of it on every cycle, and
// linking costs neither a hash nor a bucket's memory, which a map did on
// both the acquisition and the release.
var heldHere struct {
	sync.Mutex
	head *Held
	n    int
}

// holdsAny reports whether this process holds any lock taken through the
// root package.
func holdsAny() bool {
	heldHere.Lock()
	defer heldHere.Unlock()
	return heldHere.n > 0
}

// heldLocks returns the locks in the table. Called with heldHere held.
func heldLocks() []*Held {
	ls := make([]*Held, 0, heldHere.n)
	for l := heldHere.head; l != nil; l = l.next {
		ls = append(ls, l)
	}
	return ls
}

// Note puts l, the entry of a lock of protocol p held through h at path
// (and own, the file a target named "*.lock" is locked as too, "" for
// none), shared or not, in the table; its Release takes it out (Forget).
func (l *Held) Note(h lock.Handle, p lock.Protocol, path, own string, shared bool) {
	l.h, l.proto, l.path, l.own = h, p.Name(), path, own
	_, l.network = p.(lock.Closer)
	l.shared = shared
	heldHere.Lock()
	l.next = heldHere.head
	if l.next != nil {
		l.next.prev = l
	}
	heldHere.head = l
	heldHere.n++
	heldHere.Unlock()
}

// Forget takes l out of the table, once: the call that marks l
// released does (a sync.Once would cost every cycle its slow path, since
// every Lock's is new).
func (l *Held) Forget() {
	if !l.released.CompareAndSwap(false, true) {
		return
	}
	heldHere.Lock()
	if l.prev != nil {
		l.prev.next = l.next
	} else {
		heldHere.head = l.next
	}
	if l.next != nil {
		l.next.prev = l.prev
	}
	l.prev, l.next = nil, nil
	heldHere.n--
	heldHere.Unlock()
}

// conflicts reports whether l, still held, is the lock id in a mode that
// excludes a request that is shared or not: its own lock, or the kernel
// lock of the file a target named "*.lock" is locked as too (Held.own).
// l's identity is read from its paths, which name the files l holds as
// long as Check passes (a kernel lock's Check is one stat of the path):
// the lock is asked which it is only here, on a busy wait's question, so
// that taking one costs nothing more for it.
func (l *Held) conflicts(id lockID, shared bool) bool {
	if l.released.Load() || l.shared && shared {
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

// selfDeadlock returns the lock.ErrDeadlock error for a request that found
// its lock busy (busy, the lock.ErrBusy error, names the holder) when this
// process holds it itself and the caller said it cannot release it while
// it waits; nil otherwise.
func (c *Config) selfDeadlock(req *lock.Request, busy error) error {
	if !errors.Is(busy, lock.ErrBusy) {
		return nil
	}
	var hint string
	_, network := c.Protocol.(lock.Closer)
	id := idOf(c.Protocol.Name(), network, req.Path)
	switch {
	case c.heldByConflict(id, req) || c.callerKeepsConflict(id):
		hint = fmt.Sprintf("the holder is the caller itself (%s, a lock it holds and will not release while it waits): release it first, or take it once and pass it on", c.whoAsks())
	case c.HeldHere && heldConflict(id, req.Shared):
		hint = fmt.Sprintf("the holder is this very process (%s), which cannot release it while this call waits: release it first, or take it once and pass it on", c.whoAsks())
	default:
		return nil
	}
	e := &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrDeadlock, Hint: hint}
	var be *lock.Error
	if errors.As(busy, &be) {
		e.Holder = be.Holder
	}
	return e
}

// whoAsks names the process a deadlock is of, for messages: this
// process, or the program it serves (proc.WithCaller) and this one.
func (c *Config) whoAsks() string {
	if c.Caller > 0 && c.Caller != os.Getpid() {
		return fmt.Sprintf("pid %d, through %s pid %d", c.Caller, filepath.Base(os.Args[0]), os.Getpid())
	}
	return fmt.Sprintf("pid %d", os.Getpid())
}

// callerKeepsConflict reports whether id is one of the kernel locks the
// caller holds in its own process (proc.WithCallerKeeps): held
// exclusively, so any request for it conflicts.
func (c *Config) callerKeepsConflict(id lockID) bool {
	return id.proto == "flock" && slices.Contains(callerKeptIDs(c.CallerKeeps), id.id)
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
func (c *Config) heldByConflict(id lockID, req *lock.Request) bool {
	for _, l := range c.HeldBy {
		if l != nil && l.conflicts(id, req.Shared) {
			return true
		}
	}
	return false
}
