package cli

import (
	"os"
	"os/signal"
	"syscall"
)

// agentSignals sets the agent's signal behaviour and returns the channel
// of signals that end it. Ctrl-C reaches every process on the console, so
// the agent ignores it and leaves the decision to its client, whose end of
// input ends the agent.
func agentSignals() (<-chan os.Signal, func()) {
	signal.Ignore(os.Interrupt)
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	return term, func() { signal.Stop(term) }
}
