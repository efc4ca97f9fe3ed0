//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/lockspec"
)

// TestRunTargetSpellings: `hold run data`, `hold run data/` (what shell
// completion writes) and, inside the directory, `hold run .` take one
// lock, data.lock beside the directory; `hold run /` is a usage error
// that creates nothing.
func TestRunTargetSpellings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	h2, _ := startHold(t, dir, "run", "data", "-c", `touch held; while [ ! -e go ]; do sleep 0.02; done`)
	waitFor(t, filepath.Join(dir, "held"))
	for _, c := range []struct{ dir, target string }{
		{dir, "data/"},
		{dir, "data//"},
		{dir, "./data/."},
		{data, "."},
		{data, "./"},
	} {
		r := runHold(t, c.dir, "run", "--verbose", "-n", c.target, "--", "true")
		if r.code != exitConflict || !strings.Contains(r.stderr, "data.lock") {
			t.Errorf("hold run -n %s in %s while data is held: exit %d, want %d naming data.lock: %s", c.target, c.dir, r.code, exitConflict, r.stderr)
		}
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if code := waitExit(t, h2); code != 0 {
		t.Fatalf("holder of data: exit %d", code)
	}
	for _, hidden := range []string{filepath.Join(data, ".lock"), filepath.Join(data, "..lock")} {
		if _, err := os.Lstat(hidden); err == nil {
			t.Errorf("%s was created", hidden)
		}
	}

	// status first: it never creates anything, so a failure here leaves
	// nothing in the root directory.
	if r := runHold(t, dir, "status", "/"); r.code != exitUsage {
		t.Fatalf("hold status /: exit %d, want %d: %s%s", r.code, exitUsage, r.stdout, r.stderr)
	}
	r := runHold(t, dir, "run", "/", "--", "true")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--lock-file") {
		t.Errorf("hold run /: exit %d, want %d with a hint: %s", r.code, exitUsage, r.stderr)
	}
}

// Every request for the portable protocol in one process gets the same
// protocol value, which knows every lock this process's handles hold.
func TestDirProtocolOnePerProcess(t *testing.T) {
	var resolved []hold.Protocol
	for _, wait := range []time.Duration{0, time.Second} {
		s := lockspec.Spec{Target: filepath.Join(t.TempDir(), "data"), Protocol: "dir", ProtocolGiven: true, Wait: wait, WaitGiven: true}
		r, err := s.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		resolved = append(resolved, r.Proto)
	}
	if resolved[0] != resolved[1] {
		t.Fatalf("two requests got two portable protocols: %p and %p", resolved[0], resolved[1])
	}
}
