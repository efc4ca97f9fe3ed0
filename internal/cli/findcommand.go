package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/hold-dev/hold/internal/errkind"
)

// findCommand checks, before any lock is taken, that the command hold run
// or hold update would start can be found, so that a mistyped command
// fails (exit 69, as when it cannot start) without leaving a lock file
// behind. file is update's FILE: when it does not exist but is itself a
// command, the two were given the wrong way round, and the usage error
// says so. The command is looked up again when it starts.
func findCommand(op, file string, argv []string) error {
	_, err := lookPath(argv[0])
	if err == nil {
		return nil
	}
	if file != "" {
		if _, serr := os.Stat(file); os.IsNotExist(serr) {
			if _, ferr := lookPath(file); ferr == nil {
				return usagef("%s: no such file, and %s cannot run; the FILE comes first, then the filter: hold %s FILE -- %s ...", file, argv[0], op, file)
			}
		}
	}
	return &errkind.ExecError{Cmd: argv[0], Err: fmt.Errorf("%w (checked before taking the lock, so nothing was created)", err)}
}

// lookPath finds the command name as execvp(3) does, which flock(1),
// env(1) and timeout(1) use: through $PATH, or, when PATH is not set at
// all (cron, a systemd unit, env -i), through the system's default path
// (defaultPath), where Go's exec.LookPath would find nothing. A PATH set
// to anything, even empty, is the caller's choice and is used as it is.
func lookPath(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err == nil || defaultPath == "" || strings.ContainsRune(name, '/') {
		return path, err
	}
	if _, set := os.LookupEnv("PATH"); set {
		return path, err
	}
	for _, dir := range filepath.SplitList(defaultPath) {
		// A name with a slash is checked as it is, not searched for.
		if p, perr := exec.LookPath(filepath.Join(dir, name)); perr == nil {
			return p, nil
		}
	}
	return path, err
}

// commandFor returns the exec.Cmd that runs argv, found by lookPath.
func commandFor(argv []string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	if cmd.Err != nil {
		if path, err := lookPath(argv[0]); err == nil {
			cmd.Path, cmd.Err = path, nil
		}
	}
	return cmd
}
