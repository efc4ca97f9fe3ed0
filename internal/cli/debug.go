package cli

import (
	"log/slog"
	"os"
	"strconv"

	"github.com/hold-dev/hold"
)

// debugEnv names the environment variable that turns on the library's
// debug events for any subcommand.
const debugEnv = "HOLD_DEBUG"

// debugOptions returns the option that sends the library's debug events
// (waiting, queued, acquired, released, lost, the protocol's steps) to
// stderr when HOLD_DEBUG is set to a true value ("1", "true", ...; "0",
// "false" and empty leave it off). Anything else set there turns it on
// too: someone who sets a debug variable wants to see something.
func debugOptions() []hold.Option {
	v := os.Getenv(debugEnv)
	if v == "" {
		return nil
	}
	if on, err := strconv.ParseBool(v); err == nil && !on {
		return nil
	}
	h := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
	return []hold.Option{hold.Logger(slog.New(h))}
}
