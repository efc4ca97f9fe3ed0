package flock

import "time"

// procTimer is a timer a process's holds share, which runs only while some
// hold needs it: the lazy records' writes (lazy) and the loss watch's looks
// (watch). One timer per process rather than one per hold, because arming
// and stopping a timer on every acquisition cost 15% of the hand-offs
// (docs/bench.md). Its owner calls its methods with its own mutex held.
type procTimer struct {
	t       *time.Timer // made on first use
	running bool        // set, or its function is under way
}

// start sets the timer to run f after d, unless it is running already.
func (p *procTimer) start(d time.Duration, f func()) {
	if p.running {
		return
	}
	p.running = true
	if p.t == nil {
		p.t = time.AfterFunc(d, f)
	} else {
		p.t.Reset(d)
	}
}

// again is called by the timer's function: it sets the timer again, after
// d, when more is true, and otherwise lets it stop, for start to set anew.
func (p *procTimer) again(d time.Duration, more bool) {
	if more {
		p.t.Reset(d)
	} else {
		p.running = false
	}
}
