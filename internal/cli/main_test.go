//go:build unix

package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// testRoles are roles this test binary plays when re-run with roleEnv
// set to one of them (registered from init), instead of running tests.
var testRoles = map[string]func() int{}

// roleEnv selects a role of testRoles.
const roleEnv = "HOLD_CLI_TEST_ROLE"

func TestMain(m *testing.M) {
	if run, ok := testRoles[os.Getenv(roleEnv)]; ok {
		os.Exit(run())
	}
	os.Exit(runTests(m))
}

// hangLimit bounds every wait in these tests. It only catches hangs: the
// machine may be loaded, so it is generous.
const hangLimit = 30 * time.Second

// runHold runs the hold binary in dir and waits for it.
func runHold(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return runIn(t, dir, nil, holdBin, args...)
}

// runIn runs name with args in dir, with env (nil: this process's), and
// waits for it, at most hangLimit.
func runIn(t *testing.T, dir string, env []string, name string, args ...string) result {
	t.Helper()
	return runBounded(t, func(ctx context.Context) *exec.Cmd {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, env
		return cmd
	})
}

// startHold starts the hold binary in dir in the background. The caller
// waits for it (or kills it); cleanup kills it if the test did not. Its
// stderr goes to a file, not a pipe, so that waiting for hold does not
// also wait for a command that outlives it and keeps the pipe open.
func startHold(t *testing.T, dir string, args ...string) (*exec.Cmd, func() string) {
	t.Helper()
	cmd := exec.Command(holdBin, args...)
	cmd.Dir = dir
	errf, err := os.CreateTemp(t.TempDir(), "stderr-")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = errf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	errf.Close()
	killAtCleanup(t, cmd)
	return cmd, func() string { b, _ := os.ReadFile(errf.Name()); return string(b) }
}

// waitExit waits for a background hold and returns its exit status as a
// shell reports it.
func waitExit(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	waitBounded(t, cmd)
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// waitFor polls until path exists.
func waitFor(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(hangLimit)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, hangLimit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startGatedFlock starts flock(1) holding lockFile in dir while it runs
// gatedCommand, and returns once the command runs; the test's end lets
// it finish and waits for it.
func startGatedFlock(t *testing.T, flock, dir, lockFile string) *exec.Cmd {
	t.Helper()
	os.Remove(filepath.Join(dir, "ready"))
	os.Remove(filepath.Join(dir, "go"))
	fl := exec.Command(flock, lockFile, "sh", "-c", gatedCommand)
	fl.Dir = dir
	if err := fl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
		fl.Wait()
	})
	waitFor(t, filepath.Join(dir, "ready"))
	return fl
}

// gatedCommand is a shell command that announces it runs (writes its pid
// to "ready"), waits until the test creates "go", then appends "done" to
// "out". Tests use it instead of sleeps so that nothing depends on timing.
// It also stops when "ready" disappears (the test's directory was removed)
// and after a minute, so a failed test leaves nothing running.
const gatedCommand = `echo $$ > ready.tmp && mv ready.tmp ready; i=0; while [ ! -e go ] && [ -e ready ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done; echo done >> out`

// holdCommand starts `hold run ARGS... T -c gatedCommand` in dir and waits
// until the command runs. It returns the hold process and the command's pid.
func holdCommand(t *testing.T, dir string, args ...string) (*exec.Cmd, int) {
	t.Helper()
	args = append(append([]string{"run"}, args...), "T", "-c", gatedCommand)
	cmd, _ := startHold(t, dir, args...)
	waitFor(t, filepath.Join(dir, "ready"))
	var pid int
	fmt.Sscan(readFile(t, filepath.Join(dir, "ready")), &pid)
	t.Cleanup(func() {
		// Let the command finish if the test stopped early.
		os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	})
	return cmd, pid
}

// incrementCommand is a read-modify-write of ./counter with a wide window
// (a subshell reads, another process renames): without the lock,
// concurrent runs of it lose increments.
const incrementCommand = `n=$(cat counter 2>/dev/null || echo 0); echo $((n+1)) > counter.$$; mv counter.$$ counter`

// runIncrementers starts n goroutines, each running `hold ARGS -c
// incrementCommand` runs times in dir; each sends one result on errs: nil,
// or the first failure.
func runIncrementers(dir string, n, runs int, errs chan<- error, args ...string) {
	args = append(args, "-c", incrementCommand)
	startRuns(errs, n, runs, func(int, int) *exec.Cmd {
		cmd := exec.Command(holdBin, args...)
		cmd.Dir = dir
		return cmd
	})
}

func TestConcurrentRunsLoseNoIncrement(t *testing.T) {
	t.Parallel()
	const processes, increments = 16, 12
	dir := t.TempDir()
	errs := make(chan error, processes)
	runIncrementers(dir, processes, increments, errs, "run", "counter")
	collect(t, errs, processes, 3*hangLimit)
	got := strings.TrimSpace(readFile(t, filepath.Join(dir, "counter")))
	if want := fmt.Sprint(processes * increments); got != want {
		t.Fatalf("counter = %s, want %s", got, want)
	}
}

func TestChildEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runHold(t, dir, "run", "--name", "hold-cli-test-env", "--", "sh", "-c", `echo "$HOLD_TARGET"`)
	if got := strings.TrimSpace(r.stdout); r.code != 0 || got != "hold-cli-test-env" {
		t.Errorf("with --name, HOLD_TARGET = %q (exit %d, %s), want the name", got, r.code, r.stderr)
	}
	r = runHold(t, dir, "run", "data.txt", "--", "sh", "-c", `echo "$HOLD_TARGET|$HOLD_LOCK_FILE|$HOLD_TOKEN|$HOLD_LOCK_FD"`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	f := strings.Split(strings.TrimSpace(r.stdout), "|")
	if len(f) != 4 || f[0] != "data.txt" || f[1] != "data.txt.lock" || f[3] != "3" {
		t.Fatalf("child saw %q, want data.txt|data.txt.lock|TOKEN|3", r.stdout)
	}
	var tok1, tok2 uint64
	if _, err := fmt.Sscan(f[2], &tok1); err != nil || tok1 == 0 {
		t.Fatalf("HOLD_TOKEN = %q, want a positive number", f[2])
	}
	r = runHold(t, dir, "run", "data.txt", "-c", `echo $HOLD_TOKEN`)
	fmt.Sscan(r.stdout, &tok2)
	if tok2 <= tok1 {
		t.Fatalf("second token %d is not above the first %d", tok2, tok1)
	}
	// -o: the descriptor is not passed.
	r = runHold(t, dir, "run", "-o", "data.txt", "-c", `echo "${HOLD_LOCK_FD:-none}"; [ -e /dev/fd/3 ] && echo fd3 || echo nofd3`)
	if got := strings.Fields(r.stdout); len(got) != 2 || got[0] != "none" || got[1] != "nofd3" {
		t.Fatalf("with -o the child saw %q, want no lock descriptor", r.stdout)
	}
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"run", "T", "--", "true"}, 0},
		{[]string{"run", "T", "-c", "exit 7"}, 7},
		{[]string{"run", "T", "sh", "-c", "exit 3"}, 3}, // flock(1)'s form without --
		{[]string{"run", "T", "-c", "kill -TERM $$"}, 128 + 15},
		{[]string{"run", "T", "-c", "kill -KILL $$"}, 128 + 9},
		{[]string{"run", "T", "--", "no-such-command-hold-test"}, exitExecFailed},
	} {
		if r := runHold(t, dir, tc.args...); r.code != tc.want {
			t.Errorf("hold %v: exit %d, want %d (stderr %q)", tc.args, r.code, tc.want, r.stderr)
		}
	}
}

func TestBusyTimeoutAndConflictCode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, _ := holdCommand(t, dir)
	pid := fmt.Sprint(holder.Process.Pid)

	r := runHold(t, dir, "run", "--verbose", "-n", "T", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "pid "+pid) {
		t.Errorf("-n while held: exit %d, stderr %q; want 1 naming pid %s", r.code, r.stderr, pid)
	}
	r = runHold(t, dir, "run", "-n", "-E", "42", "T", "--", "true")
	if r.code != 42 {
		t.Errorf("-n -E 42 while held: exit %d, want 42", r.code)
	}
	r = runHold(t, dir, "run", "-w", "0", "T", "--", "true")
	if r.code != 1 {
		t.Errorf("-w 0 while held: exit %d, want 1", r.code)
	}
	start := time.Now()
	r = runHold(t, dir, "run", "--verbose", "-w", "1.3", "T", "--", "true")
	waited := time.Since(start)
	if r.code != 1 || !strings.Contains(r.stderr, "timed out") || !strings.Contains(r.stderr, "pid "+pid) {
		t.Errorf("-w 1.3 while held: exit %d, stderr %q; want 1, a timeout naming pid %s", r.code, r.stderr, pid)
	}
	if waited < 1300*time.Millisecond {
		t.Errorf("-w 1.3 returned after %v", waited)
	}
	// --verbose: after about a second of waiting, hold says who holds it.
	if !strings.Contains(r.stderr, "waiting") || strings.Count(r.stderr, "pid "+pid) < 2 {
		t.Errorf("--verbose wait printed %q; want a waiting message naming pid %s", r.stderr, pid)
	}
	r = runHold(t, dir, "run", "-w", "0.2", "-E", "9", "T", "--", "true")
	if r.code != 9 {
		t.Errorf("-w 0.2 -E 9 while held: exit %d, want 9", r.code)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if code := waitExit(t, holder); code != 0 {
		t.Fatalf("holder exit %d", code)
	}
	if r := runHold(t, dir, "run", "-n", "T", "--", "true"); r.code != 0 {
		t.Errorf("-n after release: exit %d: %s", r.code, r.stderr)
	}
}

func TestSharedHolders(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reader, _ := holdCommand(t, dir, "-s")
	// Another shared holder runs alongside; an exclusive one may not.
	if r := runHold(t, dir, "run", "-s", "-n", "T", "--", "true"); r.code != 0 {
		t.Errorf("second shared holder: exit %d: %s", r.code, r.stderr)
	}
	if r := runHold(t, dir, "run", "-x", "-n", "T", "--", "true"); r.code != 1 {
		t.Errorf("exclusive while shared is held: exit %d, want 1", r.code)
	}
	r := runHold(t, dir, "status", "--json", "T")
	if !strings.Contains(r.stdout, `"state":"held shared"`) {
		t.Errorf("status of a shared lock: %s", r.stdout)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, reader)
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "dir.lock"), 0o755)
	os.Symlink(filepath.Join(dir, "victim"), filepath.Join(dir, "link.lock"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.lock"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		args   []string
		want   int
		stderr string
	}{
		{"E too big", []string{"run", "-E", "256", "T", "--", "true"}, exitUsage, "between 0 and 255"},
		{"E negative", []string{"run", "-E", "-1", "T", "--", "true"}, exitUsage, "between 0 and 255"},
		{"unknown flag", []string{"run", "--frobnicate", "T", "--", "true"}, exitUsage, "unknown flag"},
		{"negative wait", []string{"run", "-w", "-2", "T", "--", "true"}, exitUsage, "seconds"},
		{"missing command", []string{"run", "T"}, exitUsage, "missing COMMAND"},
		{"missing command after --", []string{"run", "T", "--"}, exitUsage, "missing COMMAND"},
		{"missing target", []string{"run"}, exitUsage, "missing TARGET"},
		{"-c without argument", []string{"run", "T", "-c"}, exitUsage, "-c"},
		{"-s with -x", []string{"run", "-s", "-x", "T", "--", "true"}, exitUsage, "exclude"},
		{"invalid name", []string{"run", "--name", "../etc", "--", "true"}, exitUsage, "invalid lock name"},
		{"unknown protocol", []string{"run", "--protocol", "carrier-pigeon", "T", "--", "true"}, exitUsage, "unknown protocol"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "unknown command"},
		{"missing parent directory", []string{"run", "nodir/T", "--", "touch", "ran"}, exitCannotOpen, "does not exist"},
		{"lock path is a directory", []string{"run", "dir", "--", "touch", "ran"}, exitCannotOpen, "directory"},
		{"lock file is a portable lock", []string{"run", "--lock-file", "dir.lock", "T", "--", "touch", "ran"}, exitCannotOpen, "--protocol dir"},
		{"lock path is a symlink", []string{"run", "link", "--", "touch", "ran"}, exitCannotOpen, "symbolic link"},
		{"lock path is a FIFO", []string{"run", "fifo", "--", "touch", "ran"}, exitCannotOpen, "FIFO"},
		{"status of a FIFO", []string{"status", "fifo"}, exitCannotOpen, "FIFO"},
	} {
		r := runHold(t, dir, tc.args...)
		if r.code != tc.want || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("%s: hold %v: exit %d, stderr %q; want exit %d mentioning %q", tc.name, tc.args, r.code, r.stderr, tc.want, tc.stderr)
		}
	}
	// Nothing was written: no command ran, no directory or file appeared.
	for _, p := range []string{"ran", "nodir", "victim", "T.lock"} {
		if _, err := os.Lstat(filepath.Join(dir, p)); err == nil {
			t.Errorf("%s exists after bad input", p)
		}
	}
	if fi, err := os.Lstat(filepath.Join(dir, "link.lock")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink at link.lock was changed")
	}
}

func TestFlockInterop(t *testing.T) {
	t.Parallel()
	flock := testenv.LookPath(t, "flock", "flock(1) is not installed (util-linux)")
	dir := t.TempDir()

	// hold holds T: flock(1) on T.lock sees it busy.
	holder, _ := holdCommand(t, dir)
	fl := exec.Command(flock, "-n", "T.lock", "true")
	fl.Dir = dir
	if err := fl.Run(); fl.ProcessState == nil || fl.ProcessState.ExitCode() != 1 {
		t.Errorf("flock -n T.lock true while hold holds T: %v, want exit 1", err)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, holder)

	// flock(1) holds T.lock: hold run -n T is busy and names flock.
	fl = startGatedFlock(t, flock, dir, "T.lock")
	r := runHold(t, dir, "run", "-n", "T", "--", "true")
	if r.code != 1 {
		t.Errorf("hold run -n T while flock holds T.lock: exit %d (%s), want 1", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("pid %d", fl.Process.Pid)) {
		t.Logf("the busy message does not name flock(1)'s pid %d (needs /proc/locks): %s", fl.Process.Pid, r.stderr)
	}
	r = runHold(t, dir, "status", "--json", "T")
	if !strings.Contains(r.stdout, `"held":true`) {
		t.Errorf("status while flock(1) holds the lock: %s", r.stdout)
	}
}

// Issue 6: killing hold does not free a kernel lock while the command,
// which inherited the descriptor, still runs; with -o it does.
func TestKilledHoldKeepsLockWithCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, cmdPid := holdCommand(t, dir)
	holder.Process.Kill()
	waitExit(t, holder)

	if r := runHold(t, dir, "run", "-n", "T", "--", "true"); r.code != 1 {
		t.Fatalf("hold run -n after hold was killed, command still running: exit %d (%s), want busy", r.code, r.stderr)
	}
	// status decides "held" from the lock, not from the dead recorded pid.
	r := runHold(t, dir, "status", "--json", "T")
	wants := []string{`"held":true`, `"alive":false`, `"note":"the recorded holder`}
	if isLinux() {
		// The process that has the lock now: the command.
		wants = append(wants, fmt.Sprintf(`"openers":[{"pid":%d,`, cmdPid))
	}
	for _, want := range wants {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status --json of a lock inherited from a killed hold lacks %s: %s", want, r.stdout)
		}
	}
	r = runHold(t, dir, "status", "T")
	if !strings.Contains(r.stdout, "held exclusive") || !strings.Contains(r.stdout, "dead") {
		t.Errorf("status of an inherited lock: %s", r.stdout)
	}

	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitFor(t, filepath.Join(dir, "out"))
	// The command has finished: the lock is free. Give its exit a moment.
	deadline := time.Now().Add(hangLimit)
	for {
		r := runHold(t, dir, "run", "-n", "T", "--", "true")
		if r.code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock still busy after the command finished: %s", r.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestKilledHoldWithCloseFreesLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, _ := holdCommand(t, dir, "-o")
	holder.Process.Kill()
	waitExit(t, holder)
	if r := runHold(t, dir, "run", "-n", "T", "--", "true"); r.code != 0 {
		t.Fatalf("hold run -n after hold -o was killed: exit %d (%s), want the lock free", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Fatal("the command finished before the check; the test proved nothing")
	}
}

// A daemon started by the command inherits the descriptor too; when the
// command exits and hold releases, the unlock frees the lock for the
// daemon's copy as well (flock(2) locks belong to the open file
// description, which they share).
func TestDaemonDoesNotKeepLockAfterNormalExit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runHold(t, dir, "run", "T", "-c", `touch alive; (i=0; while [ ! -e go ] && [ -e alive ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done) >/dev/null 2>&1 & echo $! > daemon`)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	defer os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	var daemon int
	fmt.Sscan(readFile(t, filepath.Join(dir, "daemon")), &daemon)
	if err := syscall.Kill(daemon, 0); err != nil {
		t.Fatalf("the background process is gone already: %v", err)
	}
	if r := runHold(t, dir, "run", "-n", "T", "--", "true"); r.code != 0 {
		t.Fatalf("lock busy after hold run exited although only its daemon remains: %s", r.stderr)
	}
}

func TestSignalsReachCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd, _ := startHold(t, dir, "run", "T", "-c",
		`trap 'echo trapped > out; exit 3' TERM; touch ready; while [ -e ready ]; do sleep 0.02; done`)
	waitFor(t, filepath.Join(dir, "ready"))
	cmd.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, cmd); code != 3 {
		t.Errorf("SIGTERM to hold: exit %d, want the command's 3", code)
	}
	if got := strings.TrimSpace(readFile(t, filepath.Join(dir, "out"))); got != "trapped" {
		t.Errorf("the command's trap wrote %q", got)
	}

	// Without a trap the command dies of the signal: 128+15.
	dir = t.TempDir()
	cmd, _ = startHold(t, dir, "run", "T", "-c", `touch ready; exec sleep 30`)
	waitFor(t, filepath.Join(dir, "ready"))
	time.Sleep(50 * time.Millisecond) // let exec replace the shell
	cmd.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, cmd); code != 128+15 {
		t.Errorf("SIGTERM to hold running sleep: exit %d, want 143", code)
	}

	// A command that ignores SIGINT: a second SIGINT soon after the first
	// kills it.
	dir = t.TempDir()
	cmd, _ = startHold(t, dir, "run", "T", "-c",
		`trap 'echo int >> out' INT; touch ready; while [ -e ready ]; do sleep 0.02; done`)
	waitFor(t, filepath.Join(dir, "ready"))
	cmd.Process.Signal(syscall.SIGINT)
	waitFor(t, filepath.Join(dir, "out"))
	// Keep pressing Ctrl-C: any two within the window kill the command,
	// however slowly a loaded machine delivers them.
	stopPressing := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopPressing:
				return
			case <-time.After(200 * time.Millisecond):
				cmd.Process.Signal(syscall.SIGINT)
			}
		}
	}()
	code := waitExit(t, cmd)
	close(stopPressing)
	if code != 128+9 {
		t.Errorf("double SIGINT: exit %d, want 137 (command killed)", code)
	}
}

func TestInterruptWhileWaiting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, _ := holdCommand(t, dir)
	waiter, stderr := startHold(t, dir, "run", "--verbose", "T", "--", "touch", "ran")
	// Wait until the waiter says it waits (after about 1 s).
	deadline := time.Now().Add(hangLimit)
	for !strings.Contains(stderr(), "waiting") {
		if time.Now().After(deadline) {
			t.Fatalf("no waiting message: %q", stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	waiter.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, waiter); code != 128+15 || !strings.Contains(stderr(), "interrupted by SIGTERM") {
		t.Errorf("SIGTERM while waiting: exit %d (%s), want 143 and a message", code, stderr())
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, holder)
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the interrupted waiter ran its command")
	}
}

// Issue 6 for protocols that cannot pass the lock to the command: on Linux
// the command dies with hold, and a waiter then gets the lock.
func TestPortableProtocolCommandDiesWithHold(t *testing.T) {
	t.Parallel()
	if r := runHold(t, t.TempDir(), "status", "--protocol", "dir", "T"); r.code == exitUsage && strings.Contains(r.stderr, "unknown protocol") {
		t.Skip("the portable protocol (--protocol dir) is not registered in cmd/hold yet")
	}
	if !isLinux() {
		t.Skip("only Linux kills the command when hold dies (PR_SET_PDEATHSIG)")
	}
	dir := t.TempDir()
	holder, cmdPid := holdCommand(t, dir, "--protocol", "dir")
	holder.Process.Kill()
	waitExit(t, holder)
	deadline := time.Now().Add(hangLimit)
	for processExists(cmdPid) {
		if time.Now().After(deadline) {
			t.Fatalf("command pid %d still runs after hold was killed", cmdPid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r := runHold(t, dir, "run", "--protocol", "dir", "-w", "20", "T", "--", "true"); r.code != 0 {
		t.Fatalf("waiter after the holder and its command died: exit %d: %s", r.code, r.stderr)
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runHold(t, dir, "status", "T")
	if r.code != exitStatusFree || !strings.Contains(r.stdout, "T.lock: free") {
		t.Errorf("status of a never-used lock: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	holder, _ := holdCommand(t, dir, "--field", "job=nightly")
	r = runHold(t, dir, "status", "T")
	if r.code != 0 {
		t.Errorf("status of a held lock: exit %d, want 0: %s", r.code, r.stderr)
	}
	if r := runHold(t, dir, "status", "T", "other"); r.code != exitStatusFree {
		t.Errorf("status of a held and a free lock: exit %d, want %d", r.code, exitStatusFree)
	}
	for _, want := range []string{"held exclusive", fmt.Sprintf("pid %d", holder.Process.Pid), "alive", "job:", "nightly", "token:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status of a held lock lacks %q:\n%s", want, r.stdout)
		}
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, holder)
	r = runHold(t, dir, "status", "--json", "T", "other")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"state":"free"`) || !strings.Contains(lines[0], `"token":1`) {
		t.Errorf("status --json T other after release:\n%s", r.stdout)
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	r := runHold(t, t.TempDir(), "demo", "-n", "8", "-m", "40")
	if r.code != 0 {
		t.Fatalf("demo: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
	var unlockedLost, lockedLost int
	for _, line := range strings.Split(r.stdout, "\n") {
		var mode string
		var expected, kept, lost int
		if n, _ := fmt.Sscan(line, &mode, &expected, &kept, &lost); n == 4 {
			switch mode {
			case "none":
				unlockedLost = lost
			case "hold":
				lockedLost = lost
			}
		}
	}
	if lockedLost != 0 {
		t.Errorf("demo lost %d records under hold:\n%s", lockedLost, r.stdout)
	}
	if unlockedLost == 0 {
		t.Errorf("demo lost nothing without a lock, so it demonstrates nothing:\n%s", r.stdout)
	}
}

func isLinux() bool { return runtime.GOOS == "linux" }

// processExists reports whether pid runs (a zombie does not count).
func processExists(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && bytes.HasPrefix(bytes.TrimSpace(b[i+1:]), []byte("Z")) {
			return false
		}
	}
	return true
}
