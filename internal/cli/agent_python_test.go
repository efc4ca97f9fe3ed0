//go:build unix

package cli

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// TestPythonPackage runs the Python package's own tests (python/tests,
// with unittest) from the source tree against the hold built for these
// tests, so that `go test ./...`, and with it CI, fails when they do.
// They run with filelock's current release, in the virtual environment
// that .ci/run makes (python/.venv-filelock), so that the tests of
// filelock's newer classes run against filelock itself. Without it the
// suite runs with Debian's interpreter, where .ci/run installs filelock
// 3.9, and skips those tests; with HOLD_TEST_NOSKIP=1 the missing
// environment fails the test instead.
func TestPythonPackage(t *testing.T) {
	py := currentFilelockPython()
	if py == "" && os.Getenv(testenv.NoSkipEnv) == "1" {
		testenv.MissingTool(t, "filelock "+currentFilelock, "no virtual environment "+filelockVenv+
			" with filelock's current release: .ci/run makes it (PIP_PACKAGES)")
	}
	if py == "" {
		py = pythonWithFilelock()
	}
	if py == "" {
		var err error
		if py, err = exec.LookPath("python3"); err != nil {
			t.Skip("python3 not installed (.ci/run installs it): the Python package's tests cannot run")
		}
	}
	root, err := filepath.Abs("../../python")
	if err != nil {
		t.Fatal(err)
	}
	// Twice: with the synchronous channel, and with every request on the
	// agent's pipes, as on Windows (which has no FIFOs).
	for _, sync := range []string{"1", "0"} {
		t.Run("HOLD_AGENT_SYNC="+sync, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-s", "tests", "-v")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "HOLD_BIN="+holdBin, "PYTHONPATH="+filepath.Join(root, "src"),
				"PYTHONDONTWRITEBYTECODE=1", "HOLD_AGENT_SYNC="+sync)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("python3 -m unittest in python/: %v\n%s", err, out)
			}
			t.Logf("python3 -m unittest in python/:\n%s", out)
		})
	}
}

// filelockVenv is the virtual environment, relative to the repository,
// in which .ci/run installs currentFilelock for the Python tests.
const filelockVenv = "python/.venv-filelock"

// currentFilelock is the filelock release .ci/run installs there.
const currentFilelock = "4.3.1"

// currentFilelockPython returns the Python of filelockVenv if it has
// currentFilelock, else "".
func currentFilelockPython() string {
	py, err := filepath.Abs(filepath.Join("..", "..", filelockVenv, "bin", "python"))
	if err != nil {
		return ""
	}
	out, err := exec.Command(py, "-c", "import filelock; print(filelock.__version__)").Output()
	if err != nil || strings.TrimSpace(string(out)) != currentFilelock {
		return ""
	}
	return py
}

// An update that does not wait ("wait": 0) holds its lock until the
// client's commit; the agent must go on reading its input meanwhile, or
// the commit is never read and the agent hangs.
func TestAgentUpdateWithoutWait(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startAgent(t, holdBin, dir)
	r := c.request(`{"id":1,"op":"update","target":"f","wait":0}`)
	if r["ok"] != true {
		t.Fatalf("update: %v", r)
	}
	data := base64.StdEncoding.EncodeToString([]byte("new"))
	r = c.request(fmt.Sprintf(`{"id":2,"op":"commit","update":%v,"data":%q}`, r["update"], data))
	if r["ok"] != true || r["written"] != true {
		t.Fatalf("commit: %v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "f")); string(b) != "new" {
		t.Fatalf("file holds %q, want %q", b, "new")
	}
}
