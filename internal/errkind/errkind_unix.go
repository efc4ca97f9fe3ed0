//go:build unix

package errkind

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// SignalName returns "SIGINT" etc.
func SignalName(sig os.Signal) string {
	if s, ok := sig.(syscall.Signal); ok {
		if n := unix.SignalName(s); n != "" {
			return n
		}
	}
	return sig.String()
}

// isFilesystemFullOS: on unix the portable errno checks suffice.
func isFilesystemFullOS(error) bool { return false }
