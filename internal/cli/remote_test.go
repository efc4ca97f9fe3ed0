//go:build unix

package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A hold installed without its companion says what is missing and how to
// get it, for a network target, and runs nothing.
func TestRemoteTargetWithoutCompanion(t *testing.T) {
	dir := t.TempDir()
	lone := filepath.Join(dir, "hold")
	b, err := os.ReadFile(holdBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "ran")
	cmd := exec.Command(lone, "run", "-n", "etcd://127.0.0.1:1/x", "--", "touch", marker)
	cmd.Env = append(os.Environ(), "PATH="+dir+"/nothing-here")
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != exitExecFailed {
		t.Fatalf("exit %d (%v), want %d; output:\n%s", code, err, exitExecFailed, out)
	}
	for _, want := range []string{"hold-remote", "go install ./cmd/..."} {
		if !strings.Contains(string(out), want) {
			t.Errorf("message does not mention %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although the lock was never taken")
	}
}
