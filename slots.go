package hold

import (
	"context"
	"fmt"

	"github.com/hold-dev/hold/lock"
)

// refuseSlots is the error of a Slots(n) that no semaphore can have.
func (c *config) refuseSlots(target string) error {
	if !c.slotsSet || c.slots >= 1 {
		if c.slots > 1 && c.shared {
			return &Error{Op: "acquire", Path: target, Err: fmt.Errorf("%w: Slots(%d) with Shared", ErrInvalidOption, c.slots),
				Hint: "a slot of a semaphore has one holder: ask for slots or for a shared lock, not both"}
		}
		return nil
	}
	return &Error{Op: "acquire", Path: target, Err: fmt.Errorf("%w: Slots(%d)", ErrInvalidOption, c.slots),
		Hint: "a semaphore has at least one slot; Slots(1) is the plain lock"}
}

// acquireSlot takes a slot of the semaphore req names (Slots above 1),
// waiting when wait says so.
func (c *config) acquireSlot(ctx context.Context, target string, req *Request, wait bool) (*Lock, error) {
	sem, ok := c.protocol.(lock.Semaphore)
	if !ok {
		return nil, &Error{Op: "acquire", Path: req.Path,
			Err:  fmt.Errorf("%w: the %s protocol keeps no semaphores", ErrUnsupported, c.protocol.Name()),
			Hint: fmt.Sprintf("Slots(%d) needs a protocol that implements lock.Semaphore, such as the kernel lock (the default)", req.Slots)}
	}
	n := c.beginNamed(req)
	var h Handle
	var err error
	if wait && c.dl.SlotTryFirst() {
		// Try first: a slot that none of the ancestors that wait for
		// this process can let go of is never free (deadlock.SlotBusy),
		// and a free one is taken with nothing looked at that only a
		// busy semaphore needs.
		h, err = sem.TryAcquireSlot(req)
		if derr := c.dl.SlotBusy(req, err); derr != nil {
			n.abort()
			return nil, derr
		}
		if h == nil {
			h, err = c.dl.WaitSlot(ctx, sem, req)
		}
	} else if wait {
		h, err = sem.AcquireSlot(ctx, req)
	} else {
		h, err = sem.TryAcquireSlot(req)
	}
	if err != nil {
		n.abort()
		return nil, err
	}
	if n != nil {
		// The earlier places of a name (see finish) kept plain locks
		// only, which a semaphore's slots must not take.
		n.Handle = h
		h = n
	}
	// A target named X.lock is locked itself too, shared as the gate
	// is, in every mode: flock(1) users of X.lock are kept out of a
	// semaphore as they are out of a plain lock (see own.go).
	if h, err = c.lockOwn(ctx, h, target, wait); err != nil {
		return nil, err
	}
	h = logged(h, c.logger, req.Path)
	l := &Lock{h: h, target: target, path: req.Path, proto: c.protocol.Name()}
	// A slot holder holds the lock file shared: a later exclusive wait
	// for it in this process is a deadlock, as under a shared hold.
	l.held.Note(h, c.protocol, req.Path, "", true)
	return c.refuseIfMachineLocal(l)
}

// Slot returns which slot of a semaphore (Slots) the lock holds, from 0
// to n-1; 0 for a plain lock.
func (l *Lock) Slot() int {
	for h := l.h; h != nil; {
		if s, ok := h.(lock.SlotHandle); ok {
			return s.Slot()
		}
		w, ok := h.(lock.Wrapper)
		if !ok {
			break
		}
		h = w.Unwrap()
	}
	return 0
}
