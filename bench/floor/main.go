// Command floor is the start-cost floor of the bench suite's whole-process
// rows: the least a Go program that runs a command can cost. It runs its
// arguments as a command, with the same standard streams, and exits with
// status 1 if the command fails. `hold run T -- true` is compared with
// `floor true`: what hold adds over this is hold's own.
package main

import (
	"os"
	"os/exec"
)

func main() {
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		os.Exit(1)
	}
}
