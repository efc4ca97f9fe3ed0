package hold

import (
	"errors"
	"fmt"
	"os"
	"sync"
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
// is counted in one table by protocol and lock path until its Release.

// heldKey names a lock in the table: its protocol and lock path, the path
// as the request gave it.
type heldKey struct{ proto, path string }

// heldCount is how many of this process's Locks hold one lock path.
type heldCount struct{ exclusive, shared int }

var heldHere = struct {
	sync.Mutex
	m map[heldKey]*heldCount
}{m: map[heldKey]*heldCount{}}

// noteHeld counts l in the table, with the kernel lock of the file a
// target named "*.lock" is locked as too (Lock.own); its Release takes
// them out (forgetHeld).
func noteHeld(l *Lock, shared bool) {
	l.held = heldKey{l.proto, l.path}
	if l.own != "" {
		l.ownHeld = heldKey{"flock", l.own}
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
func (l *Lock) heldKeys() []heldKey {
	if l.ownHeld == (heldKey{}) {
		return []heldKey{l.held}
	}
	return []heldKey{l.held, l.ownHeld}
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

// heldConflict reports whether this process holds the lock at path, of
// protocol proto, in a mode that excludes a request that is shared or not.
func heldConflict(proto, path string, shared bool) bool {
	heldHere.Lock()
	defer heldHere.Unlock()
	n := heldHere.m[heldKey{proto, path}]
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
	switch name := c.protocol.Name(); {
	case c.heldByConflict(name, req):
		hint = fmt.Sprintf("the holder is the caller itself (pid %d, a lock it holds and will not release while it waits): release it first, or take it once and pass it on", os.Getpid())
	case c.failIfHeldHere && heldConflict(name, req.Path, req.Shared):
		hint = fmt.Sprintf("the holder is this very process (pid %d), which cannot release it while this call waits: release it first, or take it once and pass it on", os.Getpid())
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

// heldByConflict reports whether one of the locks given to FailIfHeldBy
// holds req's lock in a conflicting mode.
func (c *config) heldByConflict(proto string, req *Request) bool {
	for _, l := range c.heldBy {
		same := l != nil && (l.proto == proto && l.path == req.Path || proto == "flock" && l.own != "" && l.own == req.Path)
		if same && !l.released.Load() && (!l.sharedHold || !req.Shared) {
			return true
		}
	}
	return false
}
