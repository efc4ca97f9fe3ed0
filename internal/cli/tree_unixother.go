//go:build unix && !linux

package cli

import (
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// tree is every process the command started, as its own process group on
// macOS and the BSDs, which have no child subreaper that hold could use
// portably. When hold runs in the foreground of a terminal the command
// stays in hold's group instead, so that Ctrl-C and Ctrl-Z reach it as
// before (a group of its own would need hold to hand it the terminal and
// follow its job control); hold can then signal only the command itself,
// and what the command started in the background may outlive a lost lock.
type tree struct {
	own   bool
	child *os.Process
}

// newTree prepares cmd, before it starts, to be stopped as a whole.
func newTree(cmd *exec.Cmd) *tree {
	t := &tree{}
	if !terminalSignalsOurGroup() {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Setpgid = true
		t.own = true
	}
	return t
}

// exits is nil: orphans are not hold's to reap here.
func (t *tree) exits() <-chan os.Signal { return nil }

// reapOrphans does nothing: see exits.
func (t *tree) reapOrphans() {}

// close does nothing.
func (t *tree) close() {}

// started records the command's process.
func (t *tree) started(p *os.Process) {
	t.child = p
}

// signal sends sig (0: none) to the command's process group, or to the
// command alone when it shares hold's. It returns 1 if any process is
// left, else 0: a group's members cannot be counted here.
func (t *tree) signal(sig syscall.Signal) int {
	if t.child == nil {
		return 0
	}
	var err error
	if t.own {
		err = unix.Kill(-t.child.Pid, sig)
	} else {
		err = t.child.Signal(sig)
	}
	if err != nil {
		return 0
	}
	return 1
}

// terminate sends sig to the command's processes and reports 1 if any is
// left, else 0 (see signal).
func (t *tree) terminate(sig os.Signal) int {
	s, ok := sig.(syscall.Signal)
	if !ok {
		s = syscall.SIGTERM
	}
	return t.signal(s)
}

// kill sends SIGKILL to the command's processes (see signal).
func (t *tree) kill() int { return t.signal(syscall.SIGKILL) }

// alive reports 1 if any process of the command is left, else 0.
func (t *tree) alive() int { return t.signal(0) }

// none reports whether no process of the command is left, once the
// command itself has been reaped: the kernel has no member of its process
// group left. Without a group of its own (in the foreground of a
// terminal) only the command itself could be followed, and it is gone.
func (t *tree) none() bool { return t.signal(0) == 0 }

const treeHelp = `  On loss of the lock, and on SIGTERM, hold stops the command's process
  group (SIGTERM, then SIGKILL after --kill-after, again until the group is
  empty) and exits once the kernel has no member of it left. What the
  command moves out of its group (setsid, a daemon) is out of reach on this
  system (not Linux), which has no child subreaper. In the foreground of a
  terminal the command shares hold's process group (so Ctrl-C and Ctrl-Z
  work), and only the command itself is signalled: what it starts in the
  background may then outlive a lost lock.`
