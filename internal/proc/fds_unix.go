//go:build unix

package proc

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// runtimeReady is set once the Go runtime's poller is known to exist.
var runtimeReady atomic.Bool

// readyMu serialises ReadyRuntime's probes.
var readyMu sync.Mutex

// ReadyRuntime makes sure the Go runtime's network poller exists before a
// lock protocol spends file descriptors, and returns EMFILE or ENFILE
// (nothing else) when there are not enough left for it.
//
// The runtime creates its poller (on Linux an epoll instance and an
// eventfd) lazily, at the first timer, and aborts the whole process when
// it cannot: at a low descriptor limit, a timer after the lock's files
// were opened would kill the process instead of returning an error. Made
// first, the poller needs no descriptor later, and a shortage is reported
// before anything is touched. So it must run before, not beside, whatever
// opens the lock's files. Once per process: later calls cost an atomic
// load.
func ReadyRuntime() error {
	if runtimeReady.Load() {
		return nil
	}
	// One probe at a time: two probing at once could each see the other's
	// descriptors as taken, or both find two free and then need four.
	readyMu.Lock()
	defer readyMu.Unlock()
	if runtimeReady.Load() {
		return nil
	}
	// Two descriptors, as many as the poller takes, borrowed and given
	// back at once. (Without /dev/null, in a bare chroot, nothing is
	// learnt, and the poller is made as it would have been anyway.)
	a, err := openNull()
	if err == nil {
		var b int
		b, err = openNull()
		if err == nil {
			unix.Close(b)
		}
		unix.Close(a)
	}
	if err == unix.EMFILE || err == unix.ENFILE {
		return err
	}
	// Starting a function timer adds it to the runtime's timer heap,
	// which creates the poller if there is none yet.
	time.AfterFunc(time.Hour, func() {}).Stop()
	runtimeReady.Store(true)
	return nil
}

func openNull() (int, error) {
	return unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
}
