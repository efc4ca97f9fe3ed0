package hold

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

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
// is counted in one table by protocol and lock (its lockID: the lock
// itself, never the spelling of its path) until its Release.

// heldCount is how many of this process's Locks hold one lock path.
type heldCount struct{ exclusive, shared int }

var heldHere = struct {
	sync.Mutex
	m map[lockID]*heldCount
}{m: map[lockID]*heldCount{}}

// noteHeld counts l, a lock of protocol p, in the table, with the kernel
// lock of the file a target named "*.lock" is locked as too (Lock.own);
// its Release takes them out (forgetHeld).
func noteHeld(l *Lock, p Protocol, shared bool) {
	l.held = idOf(p, l.path, fileOf(l.h))
	if l.own != "" {
		l.ownHeld = fileLockID("flock", l.own)
	}
	l.sharedHold = shared
	heldHere.Lock()
	defer heldHere.Unlock()
	for _, k := range l.heldKeys() {
		n := heldHere.m[k]
		if n == nil {
			n = new(heldCount)
			heldHere.m[k] = n
		}
		if shared {
			n.shared++
		} else {
			n.exclusive++
		}
	}
}

// heldKeys are l's entries in the table.
func (l *Lock) heldKeys() []lockID {
	if l.ownHeld == (lockID{}) {
		return []lockID{l.held}
	}
	return []lockID{l.held, l.ownHeld}
}

// forgetHeld takes l out of the table, once.
func forgetHeld(l *Lock) {
	l.forget.Do(func() {
		l.released.Store(true)
		heldHere.Lock()
		defer heldHere.Unlock()
		for _, k := range l.heldKeys() {
			n := heldHere.m[k]
			if n == nil {
				continue
			}
			if l.sharedHold {
				n.shared--
			} else {
				n.exclusive--
			}
			if n.shared <= 0 && n.exclusive <= 0 {
				delete(heldHere.m, k)
			}
		}
	})
}

// heldConflict reports whether this process holds the lock id in a mode
// that excludes a request that is shared or not.
func heldConflict(id lockID, shared bool) bool {
	heldHere.Lock()
	defer heldHere.Unlock()
	n := heldHere.m[id]
	return n != nil && (n.exclusive > 0 || !shared && n.shared > 0)
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
	id := idOf(c.protocol, req.Path, nil)
	switch {
	case c.heldByConflict(id, req):
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
// process, or the program it serves (OnBehalfOf) and this one.
func (c *config) whoAsks() string {
	if c.caller > 0 && c.caller != os.Getpid() {
		return fmt.Sprintf("pid %d, through %s pid %d", c.caller, filepath.Base(os.Args[0]), os.Getpid())
	}
	return fmt.Sprintf("pid %d", os.Getpid())
}

// heldByConflict reports whether one of the locks given to FailIfHeldBy
// holds req's lock in a conflicting mode.
func (c *config) heldByConflict(id lockID, req *Request) bool {
	for _, l := range c.heldBy {
		same := l != nil && (l.held == id || id.proto == "flock" && l.own != "" && l.ownHeld == id)
		if same && !l.released.Load() && (!l.sharedHold || !req.Shared) {
			return true
		}
	}
	return false
}

// fileOf returns the open lock file of the handle h (through its
// wrappers), nil when it has none.
func fileOf(h Handle) *os.File {
	for h != nil {
		if f, ok := h.(lock.Filer); ok {
			return f.File()
		}
		w, ok := h.(lock.Wrapper)
		if !ok {
			return nil
		}
		h = w.Unwrap()
	}
	return nil
}
