package testenv

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Eventually polls cond every few milliseconds until it holds, and fails
// t once bound has passed. The bound only turns a hang into a failure: a
// test never asserts how soon cond comes true.
func Eventually(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after %v for %s", bound, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TempDir is t.TempDir for a test whose files may still be open, for a
// moment after it ends, in a goroutine or process it started: an abandoned
// wait closes its lock file only once it is granted the lock, a child's
// handles close as it exits. On Windows an open file keeps its name until
// it is closed, and TempDir's own clean-up would fail on the directory
// ("Directory is not empty"): this clean-up, which runs first, removes
// what is inside until nothing is left, up to a bound that only turns a
// hang into a failure.
func TempDir(t testing.TB) string {
	dir := t.TempDir()
	if runtime.GOOS == "windows" {
		t.Cleanup(func() {
			Eventually(t, 30*time.Second, "the files in "+dir+" to be closed", func() bool {
				entries, err := os.ReadDir(dir)
				for _, e := range entries {
					os.RemoveAll(filepath.Join(dir, e.Name()))
				}
				return err == nil && len(entries) == 0
			})
		})
	}
	return dir
}

// names counts UniqueName's calls, so that two calls within one tick of
// the clock still differ.
var names atomic.Uint64

// UniqueName returns prefix followed by the test's name, the time and a
// count: a lock name that no other test uses, on a server that every test
// of a run, and the runs before it, share (an etcd cluster, a PostgreSQL
// database).
func UniqueName(t testing.TB, prefix string) string {
	name := strings.NewReplacer("/", "-", " ", "_").Replace(t.Name())
	return prefix + name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + "-" + strconv.FormatUint(names.Add(1), 36)
}

// Command returns a command that runs this test binary again, running no
// test, with env added to its environment: how a multi-process test starts
// a worker, whose TestMain finds its role and parameters in env. The race
// detector's second of sleep at exit is turned off for it: a test waits
// for its workers to exit, often many of them.
func Command(env ...string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	cmd := exec.Command(exe, "-test.run=^$")
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(append(os.Environ(), "GORACE="+gorace), env...)
	return cmd
}

// DeadPID returns the pid of a process that has exited and been reaped:
// this test binary, run with env and no test. Tests of how a dead
// holder's lock is judged write it into an owner record.
func DeadPID(t testing.TB, env ...string) int {
	t.Helper()
	cmd := Command(env...)
	if err := cmd.Run(); err != nil {
		t.Fatalf("a process to be dead: %v", err)
	}
	return cmd.Process.Pid
}

// BuildExecutables builds hold, hold-remote and hold-postgres from the
// module at root into dir, side by side as `go install` puts them, so
// that hold finds its companions for network targets. The compiler's
// output goes to stderr.
//
// With HOLD_TEST_EXECUTABLES set to a directory, it copies them from there
// instead: scripts/wine-test builds them for Windows before it runs the
// test binaries under wine, which cannot run the go command.
func BuildExecutables(root, dir string) error {
	if from := os.Getenv(ExecutablesEnv); from != "" {
		return copyExecutables(from, dir)
	}
	for _, pkg := range []string{"cmd/hold", "cmd/hold-remote", "cmd/hold-postgres"} {
		build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./"+pkg)
		build.Dir = root
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building %s: %w", pkg, err)
		}
	}
	return nil
}

// ReadFile returns the content of the file at path, failing t when it
// cannot be read.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// WriteFile writes content to the file at path with exactly the mode perm
// (set again after the write, since the umask applies to a new file's),
// failing t when it cannot.
func WriteFile(t testing.TB, path, content string, perm fs.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

// StartPiped starts cmd with pipes to its stdin and from its stdout, as a
// test talks to a worker process, and fails t when it cannot.
func StartPiped(t testing.TB, cmd *exec.Cmd) (stdin io.WriteCloser, stdout io.ReadCloser) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err = cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return stdin, stdout
}

// RunWithExecutables is TestMain's body for the tests that run hold as a
// real process: it builds hold and its companions from the module at
// root (BuildExecutables) into a fresh directory, calls ready with that
// directory, runs the tests of m (Run), removes the directory, and returns
// the exit status for os.Exit. A failed build is said on stderr and is
// status 1, with no test run.
func RunWithExecutables(m *testing.M, root string, ready func(dir string)) int {
	dir, err := os.MkdirTemp("", "hold-executables-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := BuildExecutables(root, dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ready(dir)
	return Run(m)
}

// ExecutablesEnv names the environment variable that gives
// BuildExecutables a directory of executables built already.
const ExecutablesEnv = "HOLD_TEST_EXECUTABLES"

// Exe is the file name of the executable named name on this system:
// name.exe on Windows, name elsewhere.
func Exe(name string) string {
	if runtime.GOOS == "windows" {
		return name + ".exe"
	}
	return name
}

func copyExecutables(from, dir string) error {
	for _, name := range []string{"hold", "hold-remote", "hold-postgres"} {
		b, err := os.ReadFile(filepath.Join(from, Exe(name)))
		if err != nil {
			return fmt.Errorf("%s: %w", ExecutablesEnv, err)
		}
		if err := os.WriteFile(filepath.Join(dir, Exe(name)), b, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// PublicDir returns a new directory that every user may enter (t.TempDir's
// is private to the user running the tests), for tests that run workers
// as other users. Cleanup makes everything below it removable first.
func PublicDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error { os.Chmod(p, 0o755); return nil })
		os.RemoveAll(dir)
	})
	os.Chmod(dir, 0o755)
	return dir
}
