package errkind

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// SignalName returns the signal's name.
func SignalName(sig os.Signal) string { return sig.String() }

// isFilesystemFullOS recognises Windows' own codes for a full or
// write-protected disk.
func isFilesystemFullOS(err error) bool {
	return errors.Is(err, windows.ERROR_DISK_FULL) || errors.Is(err, windows.ERROR_WRITE_PROTECT) ||
		errors.Is(err, windows.ERROR_HANDLE_DISK_FULL)
}
