package proc

import (
	"golang.org/x/sys/windows"

	"github.com/hold-dev/hold/internal/core"
)

// exists opens the process for a limited query: a pid with no process
// fails with ERROR_INVALID_PARAMETER; a process we may not query is alive.
func exists(pid int) core.Liveness {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		if err == windows.ERROR_INVALID_PARAMETER {
			return core.Dead
		}
		if err == windows.ERROR_ACCESS_DENIED {
			return core.Alive
		}
		return core.LivenessUnknown
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err == nil && code != 259 { // STILL_ACTIVE
		return core.Dead
	}
	return core.Alive
}
