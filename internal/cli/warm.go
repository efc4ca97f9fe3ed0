package cli

import (
	"os"

	"github.com/hold-dev/hold/internal/proc"
)

// warmUp does, on a goroutine of its own, the once-per-process work that
// would otherwise fall between a network lock's acquisition and the start of
// the command: this process's identity for the owner record (host name,
// start time, masked command line) and, on Linux, the Go runtime's one
// check of whether pidfds work, which forks and reaps a child before the
// first process is started. It runs while a network target's caller waits
// for the server; a local lock is too quick to gain from it, and would only
// compete with it.
func warmUp() {
	go func() {
		proc.SelfShared()
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			p.Release()
		}
	}()
}
