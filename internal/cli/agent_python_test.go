//go:build unix

package cli

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestPythonPackage runs the Python package's own tests (python/tests,
// with unittest) from the source tree against the hold built for these
// tests, so that `go test ./...`, and with it CI, fails when they do.
// Debian's interpreter is preferred, where .ci/run installs filelock for
// the interop test; the suite skips that one test without it.
func TestPythonPackage(t *testing.T) {
	py := pythonWithFilelock()
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
