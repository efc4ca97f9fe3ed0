package cli

import (
	"os"
	"os/exec"

	"github.com/hold-dev/hold"
)

// passLock: Windows cannot pass extra handles through os/exec, and a
// LockFileEx lock belongs to hold's handle anyway, so the lock stays with
// hold.
func passLock(*exec.Cmd, *hold.Lock, bool) bool { return false }

// tieChildToParent: not done on Windows; see childLifeHelp.
func tieChildToParent(*exec.Cmd) {}

const childLifeHelp = `  On Windows the lock always stays with hold (the command cannot inherit
  it), and nothing kills the command if hold itself is killed, so it may
  then run on without the lock.`

func exitStatusOf(ps *os.ProcessState) int { return ps.ExitCode() }

func isInterrupt(sig os.Signal) bool { return sig == os.Interrupt }

// terminalSignalsOurGroup: Ctrl-C reaches every process on the console.
func terminalSignalsOurGroup() bool { return true }

// isTerminate: Windows delivers no SIGTERM to hold.
func isTerminate(os.Signal) bool { return false }
