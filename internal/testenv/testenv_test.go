package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

// TestNamedLocksPrivate: Run points named locks away from the user's
// directory, at one of the binary's own.
func TestNamedLocksPrivate(t *testing.T) {
	dir := os.Getenv("HOLD_TEST_NAMED_DIR")
	if !strings.Contains(dir, "hold-test-run-") {
		t.Fatalf("HOLD_TEST_NAMED_DIR = %q", dir)
	}
	// Windows has no permission bits: Go shows every directory as 0777
	// there, and the directory in the user's temp folder is theirs.
	if fi, err := os.Stat(dir); err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o700) {
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

// TestEventually: a condition that comes true ends the wait; one that
// never does fails the test (run in a child binary, which must fail).
func TestEventually(t *testing.T) {
	if os.Getenv("TESTENV_CHILD") == "never" {
		Eventually(t, 50*time.Millisecond, "a condition that never holds", func() bool { return false })
		t.Fatal("Eventually returned for a condition that never holds")
	}
	n := 0
	Eventually(t, time.Minute, "the third look", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("Eventually looked %d times, want 3", n)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestEventually$", "-test.v")
	cmd.Env = append(os.Environ(), "TESTENV_CHILD=never")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "still waiting after 50ms for a condition that never holds") {
		t.Errorf("Eventually of a condition that never holds: %v\n%s", err, out)
	}
}

// TestUniqueName: names differ from test to test and from call to call,
// and carry no path separator from the subtest's name.
func TestUniqueName(t *testing.T) {
	seen := map[string]bool{}
	for _, sub := range []string{"a", "a b", "c/d"} {
		t.Run(sub, func(t *testing.T) {
			for range 2 {
				name := UniqueName(t, "locks/")
				if !strings.HasPrefix(name, "locks/TestUniqueName-") || strings.ContainsAny(name[len("locks/"):], "/ ") {
					t.Errorf("UniqueName = %q", name)
				}
				if seen[name] {
					t.Errorf("UniqueName gave %q twice", name)
				}
				seen[name] = true
			}
		})
	}
}

// TestCommand: a worker gets the environment it was given, on top of
// this process's; DeadPID's process has exited.
func TestCommand(t *testing.T) {
	t.Setenv("TESTENV_INHERITED", "yes")
	cmd := Command("TESTENV_CHILD=command", "TESTENV_GIVEN=1")
	env := strings.Join(cmd.Environ(), "\n")
	for _, want := range []string{"TESTENV_INHERITED=yes", "TESTENV_GIVEN=1", "atexit_sleep_ms=0"} {
		if !strings.Contains(env, want) {
			t.Errorf("the worker's environment lacks %s", want)
		}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("worker: %v\n%s", err, out)
	}
	pid := DeadPID(t, "TESTENV_CHILD=command")
	if p, err := os.FindProcess(pid); err == nil {
		if err := p.Signal(syscall.Signal(0)); err == nil {
			t.Errorf("DeadPID's process %d is still there", pid)
		}
	}
}

// TestExecutableCopy: the copy is this binary, runnable, in the directory
// asked for.
func TestExecutableCopy(t *testing.T) {
	dir := PublicDir(t, "hold-testenv-")
	bin := ExecutableCopy(t, dir)
	if filepath.Dir(bin) != dir {
		t.Errorf("copy at %s, want it in %s", bin, dir)
	}
	orig, err := os.Stat(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(bin)
	if err != nil || fi.Size() != orig.Size() || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o755) {
		t.Fatalf("copy %v, %v; want %d bytes, mode 0755", fi, err, orig.Size())
	}
	cmd := exec.Command(bin, "-test.run=^$")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("the copy does not run: %v: %s", err, out)
	}
}
