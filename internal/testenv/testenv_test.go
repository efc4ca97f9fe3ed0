package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

// TestNamedLocksPrivate: Run points named locks away from the user's
// directory, at one of the binary's own.
func TestNamedLocksPrivate(t *testing.T) {
	dir := os.Getenv("XDG_RUNTIME_DIR")
	if !strings.Contains(dir, "hold-test-run-") {
		t.Fatalf("XDG_RUNTIME_DIR = %q", dir)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v %v", dir, fi, err)
	}
}

// TestMissingTool runs this binary again with a test that needs a tool
// that does not exist: it skips and is named in the summary, or with
// HOLD_TEST_NOSKIP=1 fails.
func TestMissingTool(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "1" {
		LookPath(t, "no-such-tool-hold-test", "nothing installs it")
		t.Fatal("LookPath of a missing tool returned")
	}
	for _, noskip := range []string{"", "1"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingTool$", "-test.v")
		cmd.Env = append(os.Environ(), "TESTENV_CHILD=1", NoSkipEnv+"="+noskip)
		out, err := cmd.CombinedOutput()
		switch {
		case noskip == "" && (err != nil || !strings.Contains(string(out), "SKIPPED for missing tools: TestMissingTool (no-such-tool-hold-test)")):
			t.Errorf("without %s: %v\n%s", NoSkipEnv, err, out)
		case noskip == "1" && (err == nil || !strings.Contains(string(out), "--- FAIL")):
			t.Errorf("with %s=1: %v\n%s", NoSkipEnv, err, out)
		}
	}
}
