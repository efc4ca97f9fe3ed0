//go:build unix

package cli

import (
	"os"
	"strings"
	"testing"
)

// runHoldEnv runs the hold binary in dir with extra environment variables.
func runHoldEnv(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return runIn(t, dir, append(os.Environ(), env...), holdBin, args...)
}

func TestDebugEventsOnlyWithHoldDebug(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, proto := range []string{"flock", "dir"} {
		r := runHoldEnv(t, dir, []string{"HOLD_DEBUG=1"}, "run", "--protocol", proto, "--fair", proto+"-target", "--", "true")
		if r.code != 0 {
			t.Fatalf("%s: exit %d: %s", proto, r.code, r.stderr)
		}
		for _, event := range []string{`msg="hold: joined fair queue"`, `msg="hold: acquired"`, `msg="hold: released"`} {
			if !strings.Contains(r.stderr, event) {
				t.Errorf("%s: HOLD_DEBUG=1: no %s event in stderr:\n%s", proto, event, r.stderr)
			}
		}
		for _, off := range []string{"HOLD_DEBUG=", "HOLD_DEBUG=0", "HOLD_DEBUG=false"} {
			r := runHoldEnv(t, dir, []string{off}, "run", "--protocol", proto, "--fair", proto+"-target", "--", "true")
			if r.code != 0 || r.stderr != "" {
				t.Errorf("%s: %s: exit %d, stderr %q; want 0 and nothing", proto, off, r.code, r.stderr)
			}
		}
	}

	// A wait that times out logs the wait, and nothing is released.
	holder, _ := holdCommand(t, dir)
	r := runHoldEnv(t, dir, []string{"HOLD_DEBUG=1"}, "run", "-w", "0.2", "T", "--", "true")
	if r.code != exitConflict || !strings.Contains(r.stderr, `msg="hold: waiting for lock"`) || strings.Contains(r.stderr, "hold: released") {
		t.Errorf("busy lock with HOLD_DEBUG=1: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	r = runHoldEnv(t, dir, nil, "run", "-w", "0.2", "T", "--", "true")
	if strings.Contains(r.stderr, "level=DEBUG") {
		t.Errorf("debug events without HOLD_DEBUG:\n%s", r.stderr)
	}
	os.WriteFile(dir+"/go", nil, 0o644)
	waitExit(t, holder)
}

func TestVersionCommandAndFlagAgree(t *testing.T) {
	t.Parallel()
	a, b := runHold(t, t.TempDir(), "version"), runHold(t, t.TempDir(), "--version")
	if a.code != 0 || b.code != 0 || a.stdout != b.stdout || !strings.HasPrefix(a.stdout, "hold ") {
		t.Errorf("hold version: %d %q; hold --version: %d %q", a.code, a.stdout, b.code, b.stdout)
	}
}
