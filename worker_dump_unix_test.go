//go:build unix

package hold_test

import (
	"os"
	"syscall"
)

// quitForDump asks a stuck worker for a goroutine dump (SIGQUIT), which
// ends up in its captured output.
func quitForDump(p *os.Process) { p.Signal(syscall.SIGQUIT) }
