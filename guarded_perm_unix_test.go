//go:build unix

package hold

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
)

// Permission checks are real only for an unprivileged user: root writes
// anything. When the tests run as root (as CI does), the worker is run as
// user nobody, from a copy of the test binary that nobody may execute.

const nobody = testenv.Nobody

// permWorkerAs returns a directory that the worker's user may enter, and
// the command to start a guarded-update-once worker as that user, with
// the worker's user, group and supplementary groups given (they apply
// only when running as root).
func permWorkerAs(t *testing.T, cred *syscall.Credential) (dir string, run func(env ...string) (int, string)) {
	t.Helper()
	root := os.Geteuid() == 0
	dir = testenv.PublicDir(t, "hold-perm-")
	bin := os.Args[0]
	if root {
		bin = testenv.ExecutableCopy(t, dir)
	}
	return dir, func(env ...string) (int, string) {
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = append(append(os.Environ(), WorkerEnv+"=guarded-update-once"), env...)
		cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
		if root {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, strings.TrimSpace(string(out))
	}
}
