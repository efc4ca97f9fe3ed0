//go:build unix

package lockspec

import (
	"syscall"

	"github.com/hold-dev/hold/internal/errkind"
)

// execRemote replaces this process with the companion: same pid, same
// descriptors, same terminal, and the companion's exit status is the user's.
func execRemote(exe string, argv, env []string) error {
	err := syscall.Exec(exe, argv, env)
	return &errkind.ExecError{Cmd: exe, Err: err}
}
