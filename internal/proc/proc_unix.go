//go:build unix

package proc

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/lock"
)

// exists asks the kernel with signal 0: ESRCH means no such process, EPERM
// means it exists but belongs to someone else.
func exists(pid int) lock.Liveness {
	err := unix.Kill(pid, 0)
	switch {
	case err == nil, errors.Is(err, unix.EPERM):
		return lock.Alive
	case errors.Is(err, unix.ESRCH):
		return lock.Dead
	}
	return lock.LivenessUnknown
}
