//go:build unix

package cli

import (
	"os"
	"syscall"
)

// forwardedSignals are the signals hold catches: they end a wait, and
// `hold run` passes them on to its command.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}
