package fairq

import (
	"context"
	"errors"
	"fmt"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/resched"
	"github.com/hold-dev/hold/lock"
)

// The kernel semaphore's waiters wait in a queue of this package's, at
// the path of the semaphore's count file (see internal/flock's slots.go);
// the stall rule passes over a first waiter that keeps its place while a
// slot stays free.
func init() {
	flock.SetSlotQueue(func(ctx context.Context, req *lock.Request, wait bool) (func(), error) {
		// The queue's waits arm timers; see proc.ReadyForLock.
		if err := proc.ReadyForLock("acquire", req.Path); err != nil {
			return nil, err
		}
		qreq := &lock.Request{Path: flock.CountPath(req.Path), Logger: req.Logger}
		pl, err := front(ctx, qreq, wait, false, slotFree(flock.Protocol{}, req.Path))
		if err == errQueued {
			return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrBusy, Hint: "waiters are queued ahead"}
		}
		if errors.Is(err, lock.ErrUnsupported) {
			return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrUnsupported,
				Hint: "semaphores of kernel locks wait in the fair queue, which is implemented on unix systems only"}
		}
		if err != nil {
			return nil, err
		}
		return pl.Leave, nil
	})
}

// The fair semaphore's capability.
var _ lock.Semaphore = Protocol{}

// slotFree returns the stall rule's test for a semaphore, which a try
// behind the queue asks too: whether a slot of the one at path is free.
// Before the first holder has made the semaphore (Slots 0) every slot
// is, unless the lock itself is held exclusively: a try that came then,
// behind that first holder, was told busy.
func slotFree(sem lock.Semaphore, path string) func() bool {
	return func() bool {
		st, err := sem.InspectSlots(path)
		if err != nil {
			return false
		}
		if st.Slots == 0 {
			return st.State != lock.HeldExclusive
		}
		for _, h := range st.SlotHolders {
			if h == nil {
				return true
			}
		}
		return false
	}
}

// semaphore returns the wrapped protocol's semaphore, or the error that
// it has none.
func (p Protocol) semaphore(path string) (lock.Semaphore, error) {
	sem, ok := p.inner.(lock.Semaphore)
	if !ok {
		return nil, &lock.Error{Op: "acquire", Path: path, Err: fmt.Errorf("%w: the %s protocol has no semaphores", lock.ErrUnsupported, p.inner.Name()),
			Hint: "ask for a plain lock, or use a protocol that keeps semaphores (the kernel lock, the default)"}
	}
	return sem, nil
}

// AcquireSlot waits in the fair queue of req.Path, as Acquire does, then
// for a slot of the wrapped protocol's semaphore: fair waiters for a slot
// and fair waiters for the lock itself are served in one order.
func (p Protocol) AcquireSlot(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(err)}
	}
	return p.acquireSlot(ctx, req, true)
}

// TryAcquireSlot takes a free slot without waiting: busy when every slot
// is held. A try does not wait behind the fair waiters queued ahead: it
// takes a slot that is free now, as a kernel semaphore's try does, so a
// first waiter stopped with Ctrl-Z does not make it busy.
func (p Protocol) TryAcquireSlot(req *lock.Request) (lock.Handle, error) {
	return p.acquireSlot(context.Background(), req, false)
}

// InspectSlots reports the wrapped protocol's semaphore.
func (p Protocol) InspectSlots(path string) (*lock.Status, error) {
	sem, err := p.semaphore(path)
	if err != nil {
		return nil, err
	}
	return sem.InspectSlots(path)
}

// slotsQueuedError is what a try of a slot returns when fair waiters
// queued ahead keep it out. It looks at the semaphore with InspectSlots
// only: the main lock's Inspect tests the lock file with an exclusive
// lock, which for its instant would refuse other tries.
func slotsQueuedError(sem lock.Semaphore, path string) error {
	e := &lock.Error{Op: "acquire", Path: path, Err: lock.ErrBusy,
		Hint: "fair waiters are queued for a slot of this semaphore"}
	if st, err := sem.InspectSlots(path); err == nil && st.Slots > 0 {
		e.Holder = st.Holder
		e.Hint += "; " + st.DescribeSlots()
	}
	return e
}

// acquireSlot is acquire for a slot: the front of the queue, then the
// wrapped semaphore.
func (p Protocol) acquireSlot(ctx context.Context, req *lock.Request, wait bool) (lock.Handle, error) {
	sem, err := p.semaphore(req.Path)
	if err != nil {
		return nil, err
	}
	if err := proc.ReadyForLock("acquire", req.Path); err != nil {
		return nil, err
	}
	free := slotFree(sem, req.Path)
	pl, err := front(ctx, req, wait, p.ticketFiles, free)
	if err == errQueued && !wait {
		// The queue orders waiters and guards nothing (the semaphore's
		// own locks do): a try takes a slot that is free now, or is
		// busy, naming the holders.
		return sem.TryAcquireSlot(req)
	}
	if err == errQueued {
		return nil, slotsQueuedError(sem, req.Path)
	}
	if err != nil {
		return nil, err
	}
	defer pl.Leave()
	if wait {
		if ctx.Done() == nil {
			resched.BeforeBlocking()
		}
		return sem.AcquireSlot(ctx, req)
	}
	return sem.TryAcquireSlot(req)
}
