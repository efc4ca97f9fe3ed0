//go:build unix

package cli

import (
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold"
)

// passLock hands a kernel lock's descriptor to the command as fd 3, unless
// closeFD (-o) says not to, and a semaphore slot's other two as fds 4 and
// 5 (hold.Lock.Files): the command keeps the whole lock if hold dies. It
// reports whether it did.
func passLock(cmd *exec.Cmd, l *hold.Lock, closeFD bool) bool {
	files := l.Files()
	if files == nil || closeFD {
		return false
	}
	cmd.ExtraFiles = files
	return true
}

// exitStatusOf is the shell's rule: the exit code, or 128+N for a command
// killed by signal N.
func exitStatusOf(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return exitSignalBase + int(ws.Signal())
	}
	return ps.ExitCode()
}

func isInterrupt(sig os.Signal) bool { return sig == syscall.SIGINT }

// terminalSignalsOurGroup reports whether hold runs in the foreground
// process group of its terminal. Ctrl-C then sends SIGINT to the whole
// group, the command (which stays in hold's group) included, so
// forwarding it would deliver it twice.
func terminalSignalsOurGroup() bool {
	for _, fd := range []int{0, 1, 2} {
		if pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err == nil {
			return pgrp == unix.Getpgrp()
		}
	}
	return false
}

// isTerminate reports whether sig asks hold to stop: it stops the whole
// command then, with --kill-after's escalation.
func isTerminate(sig os.Signal) bool { return sig == syscall.SIGTERM }
