//go:build !linux

package agent

// monoClock: elsewhere the clients' monotonic clocks are not known to be
// the agent's, so no release is written ahead (releaseAhead).
const monoClock = false

// monoNow is unused where monoClock is false.
func monoNow() int64 { return 0 }
