//go:build unix

package cli

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
)

// snapshot describes everything under dir: each entry's kind and, for a
// file, its size and a hash of its content.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		line := rel + " " + d.Type().String()
		if d.Type().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %d %x", len(b), sha256.Sum256(b))
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// TestRefusedCommandsLeaveNothing: each refused or mistyped command,
// run in a scratch directory, leaves it holding exactly what it held.
func TestRefusedCommandsLeaveNothing(t *testing.T) {
	t.Parallel()
	testenv.LookPath(t, "jq", "jq is not installed")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f.json"), []byte(`{"keep":true}`+"\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		why  string
		args []string
		code int
		says string
	}{
		{"update of a missing file, empty output", []string{"update", "new.json", "--", "jq", ".a=1"}, exitEmptyOutput, "create new.json first"},
		{"update of a missing file, failing filter", []string{"update", "new.json", "--", "false"}, 1, ""},
		{"update of a file, empty output", []string{"update", "f.json", "--", "sh", "-c", "cat >/dev/null"}, exitEmptyOutput, "--allow-empty"},
		{"update of a file, failing filter", []string{"update", "f.json", "--", "sh", "-c", "exit 3"}, 3, ""},
		{"update with the filter first", []string{"update", "--", "jq", ".", "f.json"}, 64, "FILE comes first"},
		{"update with a filter that is not there", []string{"update", "f.json", "--", "no-such-filter"}, 69, "cannot run no-such-filter"},
		{"update --must-exist of a missing file", []string{"update", "--must-exist", "new.json", "--", "cat"}, 66, ""},
		{"update of a directory", []string{"update", "d", "--", "cat"}, 66, ""},
		{"update of a pipe", []string{"update", "fifo", "--", "cat"}, 66, ""},
		{"append --must-exist of a missing file", []string{"append", "--must-exist", "new.log", "x"}, 66, ""},
		{"append to a directory", []string{"append", "d", "x"}, 66, ""},
		{"run of a command that is not there", []string{"run", "T", "--", "no-such-command"}, 69, "cannot run no-such-command"},
		{"run of a pipe", []string{"run", "fifo", "--", "true"}, 66, "device, socket or pipe"},
		{"run without a command", []string{"run", "T"}, 64, ""},
		{"run of an invalid name", []string{"run", "--name", "Bad/Name", "--", "true"}, 64, ""},
	} {
		before := snapshot(t, dir)
		r := runHold(t, dir, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.says) {
			t.Errorf("%s: hold %v: exit %d, want %d and %q: %s", c.why, c.args, r.code, c.code, c.says, r.stderr)
		}
		if after := snapshot(t, dir); after != before {
			t.Errorf("%s: hold %v changed the directory:\nbefore:\n%s\nafter:\n%s", c.why, c.args, before, after)
		}
	}
	// A device's directory gets no lock file either.
	r := runHold(t, dir, "run", "/dev/null", "--", "true")
	if _, err := os.Lstat("/dev/null.lock"); err == nil || r.code != 66 {
		os.Remove("/dev/null.lock")
		t.Errorf("hold run /dev/null: exit %d, /dev/null.lock made: %v: %s", r.code, err == nil, r.stderr)
	}
}

// TestRefusedUpdateKeepsLockFileOthersHaveOpen: a refused update removes
// the lock file it created only when nobody else has it open. Here
// flock(1) waits on it meanwhile: the file stays, flock(1) gets the lock
// on it, and hold still finds that lock busy (one file, one lock).
func TestRefusedUpdateKeepsLockFileOthersHaveOpen(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("lock files are removed only on Linux")
	}
	flock := testenv.LookPath(t, "flock", "flock(1) is not installed (util-linux)")
	dir := t.TempDir()
	lockPath := filepath.Join(dir, "new.json.lock")
	// The filter waits for "go", then prints nothing: refused.
	upd, stderr := startHold(t, dir, "update", "new.json", "--", "sh", "-c", "cat >/dev/null; "+gatedCommand+" >/dev/null")
	waitFor(t, filepath.Join(dir, "ready"))
	fl := exec.Command(flock, lockPath, "sh", "-c", "echo locked > flocked; while [ ! -e go2 ]; do sleep 0.02; done")
	fl.Dir = dir
	if err := fl.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		os.WriteFile(filepath.Join(dir, "go2"), nil, 0o644)
		fl.Wait()
	}()
	// flock(1) has the file open once it blocks in flock(2): wait until
	// the kernel lists it as a waiter.
	testenv.Eventually(t, hangLimit, "flock(1) waiting on the lock file", func() bool {
		b, _ := os.ReadFile("/proc/locks")
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) > 5 && f[1] == "->" && f[5] == fmt.Sprint(fl.Process.Pid) {
				return true
			}
		}
		return false
	})
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if code := waitExit(t, upd); code != exitEmptyOutput {
		t.Fatalf("the update: exit %d, want %d: %s", code, exitEmptyOutput, stderr())
	}
	waitFor(t, filepath.Join(dir, "flocked"))
	if _, err := os.Stat(lockPath); err != nil {
		t.Fatalf("the lock file flock(1) had open was removed: %v", err)
	}
	if r := runHold(t, dir, "run", "-n", "--lock-file", lockPath, "--", "true"); r.code != 1 {
		t.Errorf("while flock(1) holds the kept lock file, hold run -n: exit %d, want 1: %s", r.code, r.stderr)
	}
}
