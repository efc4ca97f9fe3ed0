//go:build unix

package proc

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/internal/core"
)

// exists asks the kernel with signal 0: ESRCH means no such process, EPERM
// means it exists but belongs to someone else.
func exists(pid int) core.Liveness {
	err := unix.Kill(pid, 0)
	switch {
	case err == nil, errors.Is(err, unix.EPERM):
		return core.Alive
	case errors.Is(err, unix.ESRCH):
		return core.Dead
	}
	return core.LivenessUnknown
}
