package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// The helpers every system's tests share (main_test.go and
// main_windows_test.go hold each system's own).

// holdBin is the hold binary the tests run as real processes (hold.exe
// on Windows), built once by TestMain (runTests), or under wine copied
// from the executables scripts/wine-test built.
var holdBin string

// runTests is TestMain's body once this binary is known to run tests, not
// a role: hold and its companions are built side by side, as `go install`
// puts them, so that hold finds hold-postgres and hold-remote for network
// targets.
func runTests(m *testing.M) int {
	return testenv.RunWithExecutables(m, "../..", func(dir string) {
		holdBin = filepath.Join(dir, testenv.Exe("hold"))
	})
}

// readFile is testenv's, by the name these tests use.
var readFile = testenv.ReadFile

// result is what a command run to its end left: its exit status and
// output.
type result struct {
	code           int
	stdout, stderr string
}

// runBounded runs the command that build makes, with
// exec.CommandContext and the ctx it is given, which ends it after
// hangLimit, and returns its exit status and output (build leaves Stdout
// and Stderr unset). A command that does not finish within hangLimit, or
// that cannot start, fails the test.
func runBounded(t *testing.T, build func(ctx context.Context) *exec.Cmd) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	cmd := build(ctx)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v: did not finish within %v", filepath.Base(cmd.Path), cmd.Args[1:], hangLimit)
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s %v: %v", filepath.Base(cmd.Path), cmd.Args[1:], err)
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// killAtCleanup kills cmd, started in the background, and waits for it
// when the test ends, unless the test waited for it.
func killAtCleanup(t *testing.T, cmd *exec.Cmd) {
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
}

// waitBounded waits for cmd, started in the background; one that has
// not exited within hangLimit is killed and fails the test.
func waitBounded(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(hangLimit):
		cmd.Process.Kill()
		t.Fatalf("%v did not exit within %v", cmd.Args, hangLimit)
	}
}

// startRuns runs the command that cmd makes for (i, j), to its end, runs
// times one after another (j) in each of procs goroutines (i), and sends
// each goroutine's outcome to errs: nil once all its runs succeeded, or
// its first failure, with the command's output.
func startRuns(errs chan<- error, procs, runs int, cmd func(i, j int) *exec.Cmd) {
	for i := range procs {
		go func() {
			for j := range runs {
				c := cmd(i, j)
				out, err := c.CombinedOutput()
				for tries := 0; err != nil && tries < 3 && wineSpawnFailure(out); tries++ {
					c = cmd(i, j)
					out, err = c.CombinedOutput()
				}
				if err != nil {
					errs <- fmt.Errorf("%s %v: %v: %s", filepath.Base(c.Path), c.Args[1:], err, out)
					return
				}
			}
			errs <- nil
		}()
	}
}

// wineSpawnFailure reports whether a run failed only because wine could
// not start its command: with many processes starting at once, wine's
// CreateProcess now and then fails with "Internal error", where Windows
// does not. hold then runs nothing (exit 69, "cannot run") and holds
// nothing afterwards, so the run can be made again without changing what
// the test counts.
func wineSpawnFailure(out []byte) bool {
	return testenv.UnderWine() && bytes.Contains(out, []byte("hold run: cannot run")) && bytes.Contains(out, []byte("Internal error"))
}

// collect waits for n outcomes on errs and fails on the first error, or
// when one takes longer than limit to come.
func collect(t *testing.T, errs <-chan error, n int, limit time.Duration) {
	t.Helper()
	for range n {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(limit):
			t.Fatal("runs did not finish")
		}
	}
}
