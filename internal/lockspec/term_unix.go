//go:build unix

package lockspec

import (
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether f is a terminal. Asking for the window size
// works on every unix, and fails for files, pipes and /dev/null.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	return err == nil
}

// terminalWidth returns the width of the terminal f in columns, 0 if unknown.
func terminalWidth(f *os.File) int {
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}
