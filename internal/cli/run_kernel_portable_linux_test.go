package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/lockspec"
)

// longEnv set to 1 runs the tests below at full length: a kernel holder of
// 30 s against the default portable stale time, and an idle portable
// holder kept for a minute. Without it they take a few seconds each.
const longEnv = "HOLD_TEST_LONG"

func longTests() bool { return os.Getenv(longEnv) == "1" }

// holdIn starts name with args in dir, with env added to this process's
// (less HOLD_PROTOCOL), its stderr kept.
func holdIn(t *testing.T, dir string, env []string, name string, args ...string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(withoutEnv(os.Environ(), lockspec.ProtocolEnv), env...)
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killAtCleanup(t, cmd)
	return cmd, &errb
}

// exitWithin waits for cmd at most bound (a bound that only catches
// hangs) and returns its exit status as a shell reports it.
func exitWithin(t *testing.T, cmd *exec.Cmd, bound time.Duration) int {
	t.Helper()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(bound):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not exit within %v", cmd.Args, bound)
	}
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// The section both holders run: the first marks itself inside, holds,
// and leaves; the second finds it left, or records an overlap.
const (
	firstSection  = `touch inside started; sleep %d; rm inside; touch first-done`
	secondSection = `if [ -e inside ] || [ ! -e first-done ]; then touch overlap; fi; touch second-done`
)

// kernelHoldTimes is how long the kernel holder holds and the portable
// stale time it is held against: three times that stale time, or 30 s
// against the default 10 s in the long run. portable is the portable
// waiter's hold run (a stale time of 1 s needs a short --kill-after).
func kernelHoldTimes() (hold time.Duration, env, portable []string) {
	portable = []string{"run", "--protocol", "dir", "-w", "60"}
	if longTests() {
		return 30 * time.Second, nil, append(portable, "T", "--", "sh", "-c", secondSection)
	}
	return 3 * time.Second, []string{"HOLD_DIR_STALE=1s"}, append(portable, "--kill-after", "0.2", "T", "--", "sh", "-c", secondSection)
}

// checkSecond waits for the portable holder and checks it ran after the
// first holder's section, alone.
func checkSecond(t *testing.T, dir string, portable *exec.Cmd, perr *strings.Builder, bound time.Duration) {
	t.Helper()
	if code := exitWithin(t, portable, bound); code != 0 {
		t.Fatalf("the portable holder: exit %d: %s", code, perr)
	}
	if _, err := os.Stat(filepath.Join(dir, "overlap")); err == nil {
		t.Fatal("the portable holder ran while the kernel holder held the lock")
	}
	if _, err := os.Stat(filepath.Join(dir, "second-done")); err != nil {
		t.Fatalf("the portable holder's command did not run: %v", err)
	}
}

// A kernel holder (`hold run T`) that holds far past the portable stale
// time, and a portable waiter (`hold run --protocol dir -w 60 T`): the
// portable holder starts only after the kernel holder's command ended,
// and that command exits 0 (it is not killed for a loss).
func TestPortableWaitsForKernelRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, env, pargs := kernelHoldTimes()
	kernel, kerr := holdIn(t, dir, env, holdBin, "run", "T", "--", "sh", "-c", fmt.Sprintf(firstSection, int(d/time.Second)))
	waitFor(t, filepath.Join(dir, "started"))
	portable, perr := holdIn(t, dir, env, holdBin, pargs...)
	if code := exitWithin(t, kernel, d+time.Minute); code != 0 {
		t.Fatalf("the kernel holder's command: exit %d, want 0: %s", code, kerr)
	}
	checkSecond(t, dir, portable, perr, time.Minute)
}

func init() { testRoles["acquire-holder"] = acquireHolderRole }

// acquireHolderRole takes the lock on T in its working directory with
// hold.Acquire (the library's default, the kernel lock), runs
// firstSection's steps for HOLD_CLI_TEST_HOLD, and checks that its lock
// was never lost before it releases it.
func acquireHolderRole() int {
	d, _ := time.ParseDuration(os.Getenv("HOLD_CLI_TEST_HOLD"))
	l, err := hold.Acquire(context.Background(), "T")
	if err != nil {
		fmt.Fprintln(os.Stderr, "acquire:", err)
		return 2
	}
	os.WriteFile("inside", nil, 0o644)
	os.WriteFile("started", nil, 0o644)
	time.Sleep(d)
	os.Remove("inside")
	os.WriteFile("first-done", nil, 0o644)
	if err := l.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "check:", err)
		return 4
	}
	if err := l.Release(); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		return 4
	}
	return 0
}

// The same with a Go program's hold.Acquire as the kernel holder.
func TestPortableWaitsForKernelAcquire(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d, env, pargs := kernelHoldTimes()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	kernel, kerr := holdIn(t, dir, append(env, roleEnv+"=acquire-holder", "HOLD_CLI_TEST_HOLD="+d.String()), exe)
	waitFor(t, filepath.Join(dir, "started"))
	portable, perr := holdIn(t, dir, env, holdBin, pargs...)
	if code := exitWithin(t, kernel, d+time.Minute); code != 0 {
		t.Fatalf("the hold.Acquire holder: exit %d, want 0: %s", code, kerr)
	}
	checkSecond(t, dir, portable, perr, time.Minute)
}

// idleHold is how long the idle portable holders below keep their lock:
// a minute in the long run.
func idleHold() time.Duration {
	if longTests() {
		return time.Minute
	}
	return 15 * time.Second
}

// An idle portable holder whose stale time is short keeps its lock: its
// heartbeat is fitted to the stale time it is judged by, so its own
// schedule never declares it lost (a stale time of 2 s, or 4 s with hold
// run's default --kill-after, was lost within a second). A stale time too
// short for the time hold run needs to stop its command is refused at
// once, naming the smallest that works.
func TestPortableShortStaleKeepsLock(t *testing.T) {
	t.Parallel()
	secs := fmt.Sprint(int(idleHold() / time.Second))
	for _, c := range []struct {
		name string
		env  string
		args []string
	}{
		{"stale 2s, kill-after 0.5s", "HOLD_DIR_STALE=2s", []string{"--kill-after", "0.5"}},
		{"stale 4s, default kill-after", "HOLD_DIR_STALE=4s", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := append(append([]string{"run", "--protocol", "dir"}, c.args...), "f", "--", "sleep", secs)
			cmd, errb := holdIn(t, dir, []string{c.env}, holdBin, args...)
			if code := exitWithin(t, cmd, idleHold()+time.Minute); code != 0 {
				t.Fatalf("hold %v with %s: exit %d, want 0: %s", args, c.env, code, errb)
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		r := holdEnv(t, t.TempDir(), []string{"HOLD_DIR_STALE=2s"}, "run", "--protocol", "dir", "f", "--", "true")
		if r.code == 0 || !strings.Contains(r.stderr, "at least 2.7s") {
			t.Fatalf("stale 2s with the default --kill-after: exit %d, %s; want a refusal naming 2.7s", r.code, r.stderr)
		}
	})
}
