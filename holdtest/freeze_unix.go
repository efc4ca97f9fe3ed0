//go:build unix

package holdtest

import (
	"os"
	"syscall"
)

// freeze stops p (SIGSTOP) until it is killed.
func freeze(p *os.Process) { p.Signal(syscall.SIGSTOP) }
