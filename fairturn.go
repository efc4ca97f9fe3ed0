package hold

import (
	"time"

	"github.com/hold-dev/hold/internal/fairq"
)

// FairWaiter is a process waiting in a lock's fair queue (see Fair), as
// FairTurn finds it.
type FairWaiter struct {
	// PID is the waiting process.
	PID int
	// Command is its command line, when it could be read.
	Command string
	// Stopped: the process is stopped (Ctrl-Z, SIGSTOP, a debugger), so
	// it will not take its turn until it runs again.
	Stopped bool
}

// String describes the waiter for messages: "pid 4242 (hold run --fair T
// -- make), stopped".
func (w FairWaiter) String() string { return fairq.Waiter(w).String() }

// FairTurn returns the fair waiter at the front of the queue of the lock
// at lockPath (a Status's Path), the one whose turn it is, as far as this
// process can find it: on Linux, the process holding the queue's lowest
// ticket, found by a search through the processes' open files. It is for
// messages about a wait that does not end although the lock is free; ok
// is false when nobody is queued or the waiter cannot be found (on other
// systems, always).
func FairTurn(lockPath string) (w FairWaiter, ok bool) {
	fw, ok := fairq.HeadWaiter(lockPath)
	return FairWaiter(fw), ok
}

// FairStallBound is how long a lock must stay free while the fair waiter
// whose turn it is does not take it before the waiters behind it pass it
// over: a stopped waiter keeps its place in the queue, but does not stall
// the queue for longer than this.
const FairStallBound time.Duration = fairq.StallBound
