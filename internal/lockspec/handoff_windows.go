package lockspec

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"

	"github.com/hold-dev/hold/internal/errkind"
)

// execRemote runs the companion with this process's standard streams and
// exits with its status: Windows has no exec that keeps the process. A ^C
// reaches both processes from the console; this one ignores it and lets
// the companion decide.
func execRemote(exe string, argv, env []string) error {
	cmd := exec.Command(exe, argv[1:]...)
	cmd.Args = argv // the command line as the user typed it (see handOff)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	signal.Ignore(os.Interrupt)
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return &errkind.ExecError{Cmd: exe, Err: err}
	}
	os.Exit(cmd.ProcessState.ExitCode())
	return nil
}
