//go:build unix

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
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

// TestLsOneLinePerDotLockTarget: after hold run x.lock, hold ls lists
// one lock for the one resource (x.lock and its companion x.lock.lock),
// free or held, and with flock(1) holding x.lock itself that one line
// names flock(1)'s pid; --all (Linux) lists it once too.
func TestLsOneLinePerDotLockTarget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	locks := func(out string) []string {
		var rows []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			if f := strings.Fields(l); len(f) > 0 && strings.Contains(f[0], "x.lock") {
				rows = append(rows, l)
			}
		}
		return rows
	}
	if r := runHold(t, dir, "run", "x.lock", "--", "true"); r.code != 0 {
		t.Fatalf("hold run x.lock: exit %d: %s", r.code, r.stderr)
	}
	if rows := locks(runHold(t, dir, "ls", ".").stdout); len(rows) != 1 || !strings.Contains(rows[0], "free") {
		t.Errorf("hold ls after hold run x.lock: %d lines for x.lock, want 1, free: %q", len(rows), rows)
	}
	holder, _ := startHold(t, dir, "run", "x.lock", "-c", gatedCommand)
	waitFor(t, filepath.Join(dir, "ready"))
	rows := locks(runHold(t, dir, "ls", ".").stdout)
	if len(rows) != 1 || !strings.Contains(rows[0], "held exclusive") || !strings.Contains(rows[0], fmt.Sprintf("pid %d", holder.Process.Pid)) {
		t.Errorf("hold ls while hold run x.lock (pid %d) runs: want one line naming it: %q", holder.Process.Pid, rows)
	}
	if runtime.GOOS == "linux" {
		r := runHold(t, dir, "ls", "--all")
		n := 0
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, dir+string(filepath.Separator)+"x.lock") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("hold ls --all lists x.lock %d times, want once:\n%s", n, r.stdout)
		}
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, holder)

	flock := testenv.LookPath(t, "flock", "flock(1) is not installed (util-linux)")
	fl := startGatedFlock(t, flock, dir, "x.lock")
	rows = locks(runHold(t, dir, "ls", ".").stdout)
	if len(rows) != 1 || !strings.Contains(rows[0], "held") || !strings.Contains(rows[0], strconv.Itoa(fl.Process.Pid)) {
		t.Errorf("hold ls while flock(1) (pid %d) holds x.lock: want one line naming it: %q", fl.Process.Pid, rows)
	}
}
