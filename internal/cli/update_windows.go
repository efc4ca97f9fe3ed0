package cli

import (
	"os"
	"os/exec"
)

// ownGroup: Windows has no process groups to kill as one.
func ownGroup(*exec.Cmd) {}

// killGroup kills the filter (its children are not reached on Windows).
func killGroup(p *os.Process) { p.Kill() }
