//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCommandFoundWithoutPATH: with no PATH at all (env -i, cron, a
// systemd unit), hold run, hold run -F and hold update find the command in
// the system's default path, as execvp(3) does for flock(1); a PATH set
// empty is the caller's choice and finds nothing.
func TestCommandFoundWithoutPATH(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"run", "t", "--", "echo", "hi"},
		{"run", "-F", "t", "--", "echo", "hi"},
	} {
		r := runIn(t, dir, []string{}, holdBin, args...)
		if r.code != 0 || r.stdout != "hi\n" {
			t.Errorf("env -i hold %s: exit %d, stdout %q: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "list"), []byte("b\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runIn(t, dir, []string{}, holdBin, "update", "list", "--", "sort"); r.code != 0 || readFile(t, filepath.Join(dir, "list")) != "a\nb\n" {
		t.Errorf("env -i hold update list -- sort: exit %d: %s", r.code, r.stderr)
	}
	if r := runIn(t, dir, []string{"PATH="}, holdBin, "run", "t", "--", "echo", "hi"); r.code != exitExecFailed {
		t.Errorf("PATH= hold run t -- echo hi: exit %d, want %d (an empty PATH is searched as it is): %s", r.code, exitExecFailed, r.stderr)
	}
}
