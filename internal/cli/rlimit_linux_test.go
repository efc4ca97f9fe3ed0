package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runLimited runs hold with at most n open file descriptors (prlimit,
// util-linux) in dir.
func runLimited(t *testing.T, dir string, n int, args ...string) result {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("prlimit (util-linux) is not installed")
	}
	return runIn(t, dir, nil, prlimit, append([]string{fmt.Sprintf("--nofile=%d:%d", n, n), holdBin}, args...)...)
}

// checkClearFailure fails unless r is a success or a clear error: no
// runtime dump, and a failure says that descriptors ran out.
func checkClearFailure(t *testing.T, what string, n int, r result) {
	t.Helper()
	if strings.Contains(r.stderr, "fatal error") || strings.Contains(r.stderr, "goroutine ") || r.code == 2 {
		t.Errorf("%s at %d descriptors: a runtime dump (exit %d):\n%.600s", what, n, r.code, r.stderr)
		return
	}
	switch r.code {
	case 0:
	case exitOSError, exitExecFailed:
		if !strings.Contains(r.stderr, "too many open files") {
			t.Errorf("%s at %d descriptors: exit %d does not say why: %s", what, n, r.code, r.stderr)
		}
	default:
		t.Errorf("%s at %d descriptors: exit %d, want 0, %d or %d: %s", what, n, r.code, exitOSError, exitExecFailed, r.stderr)
	}
}

// TestLowDescriptorLimit: at every descriptor limit at which hold can
// start at all, `hold run` with each protocol succeeds or fails with a
// clear error (never a runtime dump, as --fair gave when the Go
// runtime's poller came to be made after the lock files had taken the
// last descriptors), and leaves no lock behind: the portable protocol
// left an empty lock directory, which kept everyone out until it aged.
func TestLowDescriptorLimit(t *testing.T) {
	t.Parallel()
	for _, proto := range [][]string{{"--protocol", "dir"}, {"--fair"}, {"--protocol", "flock"}} {
		for n := 4; n <= 14; n++ {
			dir := t.TempDir()
			args := append(append([]string{"run"}, proto...), "T", "--", "true")
			r := runLimited(t, dir, n, args...)
			what := "hold run " + strings.Join(proto, " ")
			checkClearFailure(t, what, n, r)
			fi, err := os.Lstat(filepath.Join(dir, "T.lock"))
			if err == nil && fi.IsDir() {
				t.Errorf("%s at %d descriptors (exit %d) left a lock directory behind", what, n, r.code)
			}
			tombs, _ := filepath.Glob(filepath.Join(dir, "T.lock.rm-*"))
			if len(tombs) > 0 {
				t.Errorf("%s at %d descriptors left %v", what, n, tombs)
			}
			// Whatever happened, the lock is free now.
			if r := runHold(t, dir, append(append([]string{"run"}, proto...), "-n", "T", "--", "true")...); r.code != 0 {
				t.Errorf("after %s at %d descriptors the lock is not free: exit %d: %s", what, n, r.code, r.stderr)
			}
		}
	}
}

// TestLowDescriptorLimitGuarded: the same for `hold update` and `hold
// append`, whose filter's pipes need the runtime's poller after the lock
// is taken; the file comes out either changed or as it was.
func TestLowDescriptorLimitGuarded(t *testing.T) {
	t.Parallel()
	for n := 4; n <= 14; n++ {
		dir := t.TempDir()
		data := filepath.Join(dir, "data")
		if err := os.WriteFile(data, []byte("a\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"update", "data", "--", "cat"}, {"append", "data", "b"}} {
			r := runLimited(t, dir, n, args...)
			checkClearFailure(t, "hold "+args[0], n, r)
		}
		got, _ := os.ReadFile(data)
		if s := string(got); s != "a\n" && s != "a\nb\n" {
			t.Errorf("at %d descriptors the file holds %q", n, s)
		}
	}
}

// TestLowDescriptorLimitStaleLock: a waiter that cannot read a stale
// portable lock's owner record for want of descriptors used to call the
// lock live and wait on it for ever (here: until -w ran out). Now it
// fails at once, saying why, and leaves the lock as it found it; with
// enough descriptors it reclaims the lock.
func TestLowDescriptorLimitStaleLock(t *testing.T) {
	t.Parallel()
	for n := 5; n <= 12; n++ {
		dir := t.TempDir()
		lock := filepath.Join(dir, "T.lock")
		if err := os.Mkdir(lock, 0o755); err != nil {
			t.Fatal(err)
		}
		rec := fmt.Sprintf(`{"pid":%d,"token":"0123456789abcdef","started_at":"2020-01-01T00:00:00Z","host":%q}`, deadPID(t), hostname(t))
		if err := os.WriteFile(filepath.Join(lock, "owner.json"), []byte(rec), 0o644); err != nil {
			t.Fatal(err)
		}
		r := runLimited(t, dir, n, "run", "--protocol", "dir", "-w", "10", "T", "--", "true")
		checkClearFailure(t, "a waiter on a stale lock", n, r)
		// Either the stale lock is as it was (the waiter could not judge
		// it), or it was reclaimed and nothing is left (then the waiter
		// may still have failed to make its own): never an empty lock
		// directory or a half-made one.
		if _, err := os.Lstat(lock); err == nil {
			if got, err := os.ReadFile(filepath.Join(lock, "owner.json")); string(got) != rec {
				t.Errorf("at %d descriptors (exit %d) the lock path holds something else: %q, %v", n, r.code, got, err)
			}
			if r.code != exitOSError {
				t.Errorf("at %d descriptors: exit %d, but the stale lock is still there", n, r.code)
			}
		}
	}
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func hostname(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
