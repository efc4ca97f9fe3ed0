package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// The Windows tests of the command: hold.exe run as a real process, with
// this test binary as the command it runs (Windows has no sh to give -c
// to). scripts/wine-test runs them under wine in CI; they run on Windows
// as they are.

// childEnv names the role this binary plays when hold runs it as a
// command (see child).
const childEnv = "HOLD_CLI_TEST_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(child(role))
	}
	os.Exit(runTests(m))
}

// child is this binary run by hold as its command, in the directory of
// the test:
//
//	exit:N     exits with status N;
//	gate       writes its pid to "ready", waits (at most a minute) until
//	           "go" exists, appends "done" to "out";
//	increment  a filter for hold update: reads a number (none is 0) and
//	           writes the next;
//	counter    a read-modify-write of ./counter with a window between the
//	           read and the write, which loses increments without the lock.
func child(role string) int {
	switch {
	case strings.HasPrefix(role, "exit:"):
		n, _ := strconv.Atoi(strings.TrimPrefix(role, "exit:"))
		return n
	case role == "gate":
		pid := []byte(strconv.Itoa(os.Getpid()))
		if os.WriteFile("ready.tmp", pid, 0o644) != nil || os.Rename("ready.tmp", "ready") != nil {
			return 2
		}
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat("go"); err == nil {
				break
			}
		}
		f, err := os.OpenFile("out", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return 2
		}
		defer f.Close()
		f.WriteString("done\n")
		return 0
	case role == "increment":
		var n int
		fmt.Fscan(os.Stdin, &n)
		fmt.Println(n + 1)
		return 0
	case role == "counter":
		b, _ := os.ReadFile("counter")
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(5 * time.Millisecond)
		tmp := fmt.Sprintf("counter.%d", os.Getpid())
		if os.WriteFile(tmp, []byte(strconv.Itoa(n+1)), 0o644) != nil || os.Rename(tmp, "counter") != nil {
			return 2
		}
		return 0
	}
	fmt.Fprintf(os.Stderr, "unknown %s %q\n", childEnv, role)
	return 2
}

// childCommand is the command line that runs this binary as child role.
func childCommand(t *testing.T) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe, "-test.run=^$"}
}

// hangLimit bounds every wait in these tests. It only catches hangs: the
// machine may be loaded, and under wine every process is slow to start
// (one wineserver process serves them all).
const hangLimit = 2 * time.Minute

// holdCmd is hold ARGS... run in dir, whose command (after "--", if
// given) plays role.
func holdCmd(dir, role string, args ...string) *exec.Cmd {
	return holdCmdContext(context.Background(), dir, role, args...)
}

func holdCmdContext(ctx context.Context, dir, role string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, holdBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), childEnv+"="+role)
	return cmd
}

// runHold runs hold in dir and waits for it.
func runHold(t *testing.T, dir, role string, args ...string) result {
	t.Helper()
	return runBounded(t, func(ctx context.Context) *exec.Cmd { return holdCmdContext(ctx, dir, role, args...) })
}

// startHold starts hold in the background; cleanup kills it if the test
// did not wait for it.
func startHold(t *testing.T, dir, role string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := holdCmd(dir, role, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killAtCleanup(t, cmd)
	return cmd
}

// waitExit waits for a background hold and returns its exit status.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	waitBounded(t, cmd)
	return cmd.ProcessState.ExitCode()
}

// gatedHolder starts `hold run ARGS... T -- gate` in dir, waits until the
// command runs, and makes sure the command ends with the test.
func gatedHolder(t *testing.T, dir string, args ...string) *exec.Cmd {
	t.Helper()
	args = append(append(append([]string{"run"}, args...), "T", "--"), childCommand(t)...)
	cmd := startHold(t, dir, "gate", args...)
	t.Cleanup(func() { os.WriteFile(filepath.Join(dir, "go"), nil, 0o644) })
	testenv.Eventually(t, hangLimit, "the held command to start", func() bool {
		_, err := os.Stat(filepath.Join(dir, "ready"))
		return err == nil
	})
	return cmd
}

// parallelRuns runs hold ARGS... (its command playing role) n times in
// each of procs goroutines, and fails on the first run that fails.
func parallelRuns(t *testing.T, dir, role string, procs, n int, args func(i, j int) []string) {
	t.Helper()
	errs := make(chan error, procs)
	startRuns(errs, procs, n, func(i, j int) *exec.Cmd { return holdCmd(dir, role, args(i, j)...) })
	collect(t, errs, procs, 5*hangLimit)
}
