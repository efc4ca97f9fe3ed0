package proc

import (
	"golang.org/x/sys/windows"

	"github.com/hold-dev/hold/lock"
)

// exists opens the process for a limited query: a pid with no process
// fails with ERROR_INVALID_PARAMETER; a process we may not query is alive.
func exists(pid int) lock.Liveness {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		if err == windows.ERROR_INVALID_PARAMETER {
			return lock.Dead
		}
		if err == windows.ERROR_ACCESS_DENIED {
			return lock.Alive
		}
		return lock.LivenessUnknown
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err == nil && code != 259 { // STILL_ACTIVE
		return lock.Dead
	}
	return lock.Alive
}
