package hold

import (
	"context"
	"fmt"

	"github.com/hold-dev/hold/lock"
)

// ErrSlotCount: a semaphore asked for with a number of slots other than
// the one its holders use (see Slots and lock.ErrSlotCount).
var ErrSlotCount = lock.ErrSlotCount

// Slots makes Acquire, TryAcquire and Do take one of n slots of a
// counting semaphore at the lock path, instead of the lock itself: at
// most n holders at once. A waiter takes the first slot that is free, and
// waiters are served in the order they came (nobody sleeps on a busy slot
// while another is free); TryAcquire is busy only when all n slots are
// held (or earlier waiters are queued for the next one), and its error
// names every holder. Lock.Slot says which slot is held, from 0 to n-1.
// Fencing tokens rise across all the slots of one lock path.
//
// n is part of the lock: while any slot is held, a request with another n
// fails with an error matching ErrSlotCount that names the n in use;
// when no slot is held, a new n just works. Slots(1) is the plain lock
// itself (Slot is then 0). n below 1 is refused with ErrInvalidOption.
//
// A plain lock and the slots of a semaphore at one lock path never hold
// at once: each slot holder holds the lock file shared, so a plain
// (exclusive) Acquire waits until no slot is held, and the slots wait for
// a plain holder. Shared holders (Shared) and slot holders may hold
// together; Slots and Shared together are refused.
//
// The kernel lock keeps slot k in the file "<lock path>.slotk", a kernel
// lock flock(1) can take too, and the n in use in "<lock path>.slots";
// a crashed holder's slot is free at once. The fair queue (Fair) serves
// slot waiters in one order with the lock's own fair waiters. A protocol
// that implements no lock.Semaphore refuses n above 1 with an error
// matching ErrUnsupported that names it. FailIfHeldHere and FailIfHeldBy
// look at the plain locks a process holds; a slot holder may wait for
// another slot of the same semaphore without deadlock, so they do not
// apply to a semaphore's slots.
func Slots(n int) Option {
	return Option{kind: optSlots, set: func(c *config) { c.slots, c.slotsSet = n, true }}
}

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
	if wait {
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
	h = logged(h, c.logger, req.Path)
	l := &Lock{h: h, target: target, path: req.Path, proto: c.protocol.Name()}
	// A slot holder holds the lock file shared: a later exclusive wait
	// for it in this process is a deadlock, as under a shared hold.
	noteHeld(l, c.protocol, true)
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
