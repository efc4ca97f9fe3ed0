//go:build unix

package cli

import (
	"os"
	"os/exec"
	"syscall"
)

// ownGroup starts the filter in a process group of its own, so that hold
// can kill it together with anything it started (sh -c '... | ...').
// Ctrl-C on a terminal then reaches only hold, which kills the group.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// killGroup kills the filter's process group.
func killGroup(p *os.Process) {
	if syscall.Kill(-p.Pid, syscall.SIGKILL) != nil {
		p.Kill()
	}
}
