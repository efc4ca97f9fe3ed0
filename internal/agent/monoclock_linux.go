package agent

import "golang.org/x/sys/unix"

// monoClock: the clients' monotonic clock is CLOCK_MONOTONIC here
// (Python's time.monotonic_ns, Node's process.hrtime), which the agent
// reads too, so a release written ahead can say when the client let go.
const monoClock = true

// monoNow reads CLOCK_MONOTONIC in nanoseconds.
func monoNow() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
