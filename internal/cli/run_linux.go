package cli

import (
	"os/exec"
	"syscall"
)

// tieChildToParent makes the kernel kill the command if hold dies, for
// protocols whose lock hold cannot hand to the command (dir, etcd): the
// lock goes when hold goes, so the command must go too. See runLocked for
// why the starting thread is kept.
func tieChildToParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

const childLifeHelp = `  Other protocols (dir, etcd) cannot hand their lock to the command: it
  ends when hold ends. On Linux the command is therefore killed (SIGKILL,
  via PR_SET_PDEATHSIG) if hold dies, so it never runs without the lock.
  Processes the command starts in the background are not covered.`
