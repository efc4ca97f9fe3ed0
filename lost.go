package hold

import (
	"sync/atomic"

	"github.com/hold-dev/hold/lock"
)

// AfterLost arranges for f to be called, in its own goroutine, once the
// lock is found to be no longer this holder's (when Lost would close), or
// at once if it already was, as context.AfterFunc does for a context.
// stop cancels the call: it reports whether it stopped f from being run;
// call it on Release, or f may still run for a loss found meanwhile. It is
// for a process that holds many locks and must hear of each loss (the
// agent): a kernel lock is then watched without a goroutine per lock
// waiting on Lost. Other protocols may still spend one.
func (l *Lock) AfterLost(f func()) (stop func() bool) {
	for h := l.h; h != nil; {
		if n, ok := h.(lock.LostNotifier); ok {
			return n.AfterLost(f)
		}
		// hold's wrappers pass Lost on unchanged, so the wrapped
		// handle's notice is the lock's.
		w, ok := h.(lock.Wrapper)
		if !ok {
			break
		}
		h = w.Unwrap()
	}
	return afterClosed(l.Lost(), f)
}

// afterClosed is AfterLost for a handle that only offers Lost: a goroutine
// waits for the channel, or for stop.
func afterClosed(lost <-chan struct{}, f func()) (stop func() bool) {
	const (
		waiting = iota
		ran
		stopped
	)
	var state atomic.Int32
	if lost == nil {
		// Never lost: there is nothing to wait for.
		return func() bool { return state.CompareAndSwap(waiting, stopped) }
	}
	stopc := make(chan struct{})
	go func() {
		select {
		case <-lost:
			if state.CompareAndSwap(waiting, ran) {
				f()
			}
		case <-stopc:
		}
	}()
	return func() bool {
		if state.CompareAndSwap(waiting, stopped) {
			close(stopc)
			return true
		}
		return false
	}
}
