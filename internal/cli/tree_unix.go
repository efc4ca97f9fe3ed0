//go:build unix

package cli

import (
	"os"
	"syscall"
)

// terminate sends sig to every live process of the command and returns
// how many it found (tree_linux.go and tree_unixother.go say how they are
// found and counted).
func (t *tree) terminate(sig os.Signal) int {
	s, ok := sig.(syscall.Signal)
	if !ok {
		s = syscall.SIGTERM
	}
	return t.signal(s)
}

// kill sends SIGKILL to every live process of the command and returns how
// many it found.
func (t *tree) kill() int { return t.signal(syscall.SIGKILL) }

// alive returns how many processes of the command are alive.
func (t *tree) alive() int { return t.signal(0) }
