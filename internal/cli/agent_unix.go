//go:build unix

package cli

import (
	"os"
	"os/signal"
	"syscall"
)

// agentSignals sets the agent's signal behaviour and returns the channel
// of signals that end it (SIGTERM). SIGINT and SIGHUP are ignored: a
// terminal sends them to the client's whole process group, and the client
// (whose end of input ends the agent) decides. SIGPIPE is caught so that a
// write to a vanished client fails with EPIPE instead of killing the agent
// before it has released its locks.
func agentSignals() (<-chan os.Signal, func()) {
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	return term, func() { signal.Stop(term); signal.Stop(pipe) }
}
