package cli

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// forwardedSignals are the signals hold catches. Windows delivers only
// Ctrl-C (os.Interrupt) to a console process.
var forwardedSignals = []os.Signal{os.Interrupt}

// signalName returns the signal's name.
func signalName(sig os.Signal) string { return sig.String() }

// isTerminal reports whether f is a console.
func isTerminal(f *os.File) bool {
	var mode uint32
	return windows.GetConsoleMode(windows.Handle(f.Fd()), &mode) == nil
}

// terminalWidth returns the width of the console f in columns, 0 if unknown.
func terminalWidth(f *os.File) int {
	var info windows.ConsoleScreenBufferInfo
	if windows.GetConsoleScreenBufferInfo(windows.Handle(f.Fd()), &info) != nil {
		return 0
	}
	return int(info.Window.Right-info.Window.Left) + 1
}

// isFilesystemFullOS recognises Windows' own codes for a full or
// write-protected disk.
func isFilesystemFullOS(err error) bool {
	return errors.Is(err, windows.ERROR_DISK_FULL) || errors.Is(err, windows.ERROR_WRITE_PROTECT) ||
		errors.Is(err, windows.ERROR_HANDLE_DISK_FULL)
}
