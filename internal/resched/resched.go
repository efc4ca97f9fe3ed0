// Package resched keeps the Go runtime's monitor thread quiet in a process
// whose goroutines do little but make system calls, as lock waiters and
// loops that take a free lock over and over do.
package resched

import (
	"runtime"
	"sync/atomic"
	"time"
)

// A lock waiter that waits with a context that cannot end makes its
// blocking system calls (flock(2), F_OFD_SETLKW) on the caller's
// goroutine: in a loop that takes a lock again and again, that goroutine
// does nothing but run briefly and block in the kernel, and never passes
// through the Go scheduler. The runtime's monitor thread
// (sysmon) treats a P whose scheduling tick has not moved for 10 ms as
// hogged: from then on, every time it finds that goroutine in a system
// call it takes the P away (starting another thread to poll the network),
// and every such retake sends the monitor back to waking up every 20 µs.
// In a process that queues for a lock over and over, the monitor so never
// rests, and costs more CPU and context switches than the hand-offs
// themselves (docs/bench.md and docs/fair.md have the figures).
//
// Going through the scheduler (runtime.Gosched) moves the tick. It costs a
// thread wake-up of its own when another P is idle, so a waiter does it
// only when about to block and at most once per yieldEvery per process:
// often enough that no P looks hogged for 10 ms, rarely enough to cost
// nothing measurable.

// yieldEvery is the least time between two passes through the scheduler.
const yieldEvery = 5 * time.Millisecond

// yieldGate lets one caller through at most once per yieldEvery.
type yieldGate struct {
	last atomic.Int64 // when the last caller was let through, as since epoch
}

// epoch is the origin of yieldGate's times: time.Since reads the monotonic
// clock.
var epoch = time.Now()

// due reports whether the caller, at time now (since epoch), should pass
// through the scheduler, and if so records it.
func (g *yieldGate) due(now time.Duration) bool {
	last := g.last.Load()
	return now-time.Duration(last) >= yieldEvery && g.last.CompareAndSwap(last, int64(now))
}

// processYield is the gate every waiter of this process shares: sysmon
// watches the process's Ps, not its goroutines.
var processYield yieldGate

// The same holds for a goroutine that takes a free lock again and again:
// an uncontended kernel lock is open, flock, statx and close, none of
// which blocks in Go, so that goroutine too runs only between system
// calls and never passes through the scheduler. After 10 ms the monitor
// takes its P away in every system call it finds it in, the goroutine
// carries on with the process's other, idle P without being
// rescheduled, which then looks hogged in its turn, and the monitor,
// back to waking every 20 µs, hands the Ps back and forth, starting a
// thread to poll the network at each hand-over. That cost an uncontended
// Acquire + Release about a tenth of its time (docs/bench.md). So a
// kernel lock's hold that did not wait passes the gate too, on its
// release (AfterCycle), but only from a loop of free locks: every
// cycleEvery-th cycle looks at the gate, unless one of the process's last
// quietCycles cycles waited for its lock (AfterWait). Processes handing a
// lock around make bursts of quick cycles too, but wait now and then, and
// there a pass costs more than it saves: 30 of them on 2 CPUs, passing
// once per 80 or so cycles, made 1.2 to 1.8 context switches per
// acquisition against 0.8 to 1.3 without the pass, and used more CPU per
// acquisition.

// cycleEvery is how many cycles (AfterCycle) go by between two looks at
// the clock; quietCycles is how many cycles without a wait (AfterWait)
// make a loop of free locks.
const (
	cycleEvery  = 16
	quietCycles = 1024
)

// cycles counts AfterCycle's and AfterWait's calls; lastWait is the
// count at the last AfterWait, 0 before the first.
var (
	cycles   atomic.Uint64
	lastWait atomic.Uint64
)

// passes counts the callers let through the gate (Passes).
var passes atomic.Uint64

// BeforeBlocking is called just before a blocking system call made on the
// caller's goroutine (a wait that no context can end).
func BeforeBlocking() { pass() }

// AfterCycle is called at the end of a lock cycle whose system calls ran
// on the caller's goroutine without waiting: a loop of them never passes
// through the scheduler otherwise. Every cycleEvery-th call looks at the
// gate (once per yieldEvery per process), unless one of the last
// quietCycles cycles waited.
func AfterCycle() {
	n := cycles.Add(1)
	if n%cycleEvery != 0 {
		return
	}
	if w := lastWait.Load(); w != 0 && n-w < quietCycles {
		return
	}
	pass()
}

// AfterWait is called at the end of a lock cycle that waited for its lock
// (see AfterCycle).
func AfterWait() { lastWait.Store(cycles.Add(1)) }

// pass lets the caller through the scheduler if the process's gate is due.
func pass() {
	if processYield.due(time.Since(epoch)) {
		passes.Add(1)
		runtime.Gosched()
	}
}

// Passes returns how many times this process's callers of BeforeBlocking
// and AfterCycle were let through the scheduler: what tests count to
// show that a path passes the gate.
func Passes() uint64 { return passes.Load() }
