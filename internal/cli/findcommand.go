package cli

import (
	"fmt"
	"os"
	"os/exec"

	"github.com/hold-dev/hold/internal/errkind"
)

// findCommand checks, before any lock is taken, that the command hold run
// or hold update would start can be found, so that a mistyped command
// fails (exit 69, as when it cannot start) without leaving a lock file
// behind. file is update's FILE: when it does not exist but is itself a
// command, the two were given the wrong way round, and the usage error
// says so. The command is looked up again when it starts.
func findCommand(op, file string, argv []string) error {
	_, err := exec.LookPath(argv[0])
	if err == nil {
		return nil
	}
	if file != "" {
		if _, serr := os.Stat(file); os.IsNotExist(serr) {
			if _, ferr := exec.LookPath(file); ferr == nil {
				return usagef("%s: no such file, and %s cannot run; the FILE comes first, then the filter: hold %s FILE -- %s ...", file, argv[0], op, file)
			}
		}
	}
	return &errkind.ExecError{Cmd: argv[0], Err: fmt.Errorf("%w (checked before taking the lock, so nothing was created)", err)}
}
