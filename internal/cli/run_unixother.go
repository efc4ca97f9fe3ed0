//go:build unix && !linux

package cli

import "os/exec"

// tieChildToParent: only Linux can have the kernel kill a child when its
// parent dies (PR_SET_PDEATHSIG); here the command may outlive a killed
// hold, as childLifeHelp says.
func tieChildToParent(*exec.Cmd) {}

const childLifeHelp = `  Other protocols (dir, etcd) cannot hand their lock to the command: it
  ends when hold ends. On this system (not Linux) nothing kills the command
  if hold itself is killed, so it may then run on without the lock.`
