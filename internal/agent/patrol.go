package agent

import (
	"errors"
	"time"

	"github.com/hold-dev/hold"
)

// How the agent tells its client of a lost lock unasked.

// patrolEvery is how often the agent looks at the files of its kernel
// locks.
const patrolEvery = time.Second

// isKernel reports whether al is a kernel lock of this agent's own.
func isKernel(al *heldLock) bool { return al.remote == 0 && al.l.Protocol() == "flock" }

// patrolLocks finds the kernel locks whose lock file was removed or
// replaced, and tells the client unasked, within patrolEvery. A kernel
// lock cannot be taken away: it is lost only when its path stops naming
// the locked file, and nothing but a look at the path shows that. (The
// other protocols watch themselves, with a heartbeat or a lease, and
// watchLoss reports them.) It runs while the agent holds a kernel lock:
// one stat per lock and round.
func (a *agent) patrolLocks() {
	defer a.wg.Done()
	t := time.NewTicker(patrolEvery)
	defer t.Stop()
	type held struct {
		n  uint64
		al *heldLock
	}
	var kernel []held
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
		}
		kernel = kernel[:0]
		a.mu.Lock()
		for n, al := range a.locks {
			if isKernel(al) && !al.lostTold {
				kernel = append(kernel, held{n, al})
			}
		}
		if len(kernel) == 0 {
			a.patrol = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		for _, k := range kernel {
			err := k.al.l.Check()
			if !errors.Is(err, hold.ErrLost) {
				continue // held, or released meanwhile
			}
			a.mu.Lock()
			tell := a.locks[k.n] == k.al
			k.al.lostTold = true
			a.mu.Unlock()
			if tell {
				a.send(&reply{Event: "lost", Lock: k.n, Path: k.al.l.Path(), Error: errorOf(err)})
			}
		}
	}
}

// watchLoss tells the client, unasked, when lock n is found lost. Kernel
// locks are left to patrolLocks: their loss is found only by looking, and
// a goroutine per lock would cost every acquisition a thread wake-up.
func (a *agent) watchLoss(n uint64, al *heldLock) {
	if isKernel(al) {
		return
	}
	lost := al.l.Lost()
	if lost == nil {
		return
	}
	a.mu.Lock()
	closed := a.closed
	if !closed {
		a.wg.Add(1)
	}
	a.mu.Unlock()
	if closed {
		return // shutdown releases the lock
	}
	go func() {
		defer a.wg.Done()
		select {
		case <-lost:
			a.send(&reply{Event: "lost", Lock: n, Path: al.l.Path(),
				Error: errorOf(al.l.Check())})
		case <-al.done:
		case <-a.ctx.Done():
		}
	}()
}
