package agent

// How the agent tells its client of a lost lock unasked.

// watchLoss tells the client, unasked, when lock n is found lost. The
// library finds it, for every protocol (a heartbeat, a lease, a kernel
// lock's file removed or replaced), and the agent passes the news on.
// AfterLost, not a goroutine waiting on Lost: a goroutine per lock would
// cost every acquisition a thread wake-up, and its release another, which
// on a busy machine cost more than the lock itself (with a goroutine per
// kernel lock, a try and release on the synchronous channel took 1.3
// times as long).
func (a *agent) watchLoss(n uint64, al *heldLock) {
	stop := al.l.AfterLost(func() {
		al.lostAt.Store(monoNow())
		a.mu.Lock()
		// Released meanwhile, or the agent is closing (and releases
		// it): nobody is to be told.
		tell := !a.closed && a.locks[n] == al
		if tell {
			a.wg.Add(1)
		}
		a.mu.Unlock()
		if tell {
			defer a.wg.Done()
			a.send(&reply{Event: "lost", Lock: n, Path: al.l.Path(),
				Error: errorOf(al.l.Check())})
		}
	})
	al.watchMu.Lock()
	released := al.released
	if !released {
		al.stopWatch = stop
	}
	al.watchMu.Unlock()
	if released {
		stop() // released before the watch began
	}
}

// stopWatching ends lock al's loss watch, on its release.
func (al *heldLock) stopWatching() {
	al.watchMu.Lock()
	al.released = true
	stop := al.stopWatch
	al.watchMu.Unlock()
	if stop != nil {
		stop()
	}
}
