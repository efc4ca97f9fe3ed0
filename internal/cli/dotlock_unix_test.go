//go:build unix

package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
)

// A target whose name ends in ".lock" is its own lock file (issue 29).

// TestDotLockRunAndUpdateExclude: `hold run c.lock` now locks c.lock
// itself, while `hold update c.lock` replaces c.lock by rename and keeps
// its own lock apart (c.lock.lock). They must still exclude each other.
// Runners increment the counter in place and check, during their hold,
// that the file is neither replaced nor changed; updaters increment it by
// rename. No increment is lost and no runner sees an update mid-hold.
func TestDotLockRunAndUpdateExclude(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.lock"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The runner reads, waits a moment, and looks again: the same inode
	// and the same number, or it records a violation.
	const runner = `i=$(stat -c %i c.lock); n=$(cat c.lock); sleep 0.01; ` +
		`[ "$(stat -c %i c.lock)" = "$i" ] && [ "$(cat c.lock)" = "$n" ] || echo "$$ saw $n change" >> violations; ` +
		`echo $((n+1)) > c.lock`
	const workers, rounds = 4, 8
	errs := make(chan error, 2*workers)
	for range workers {
		go func() {
			for range rounds {
				cmd := exec.Command(holdBin, "run", "c.lock", "-c", runner)
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- fmt.Errorf("hold run c.lock: %v: %s", err, out)
					return
				}
			}
			errs <- nil
		}()
		go func() {
			for range rounds {
				cmd := exec.Command(holdBin, "update", "c.lock", "--", "sh", "-c", `read n; sleep 0.005; echo $((n+1))`)
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- fmt.Errorf("hold update c.lock: %v: %s", err, out)
					return
				}
			}
			errs <- nil
		}()
	}
	collect(t, errs, 2*workers, 3*hangLimit)
	if b, err := os.ReadFile(filepath.Join(dir, "violations")); err == nil {
		t.Errorf("runners saw c.lock change during their hold:\n%s", b)
	}
	got := strings.TrimSpace(readFile(t, filepath.Join(dir, "c.lock")))
	if want := fmt.Sprint(2 * workers * rounds); got != want {
		t.Errorf("counter = %s, want %s: increments were lost", got, want)
	}
}

// TestDotLockFlockInterop: `hold run -n x.lock` and `flock -n x.lock`
// exclude each other both ways with the same exit status; `hold status
// x.lock` reports flock(1)'s hold, naming its pid; run, status, ls and
// break never create x.lock.lock.
func TestDotLockFlockInterop(t *testing.T) {
	t.Parallel()
	flock := testenv.LookPath(t, "flock", "flock(1) is not installed (util-linux)")
	dir := t.TempDir()
	noDoubleLock := func(when string) {
		t.Helper()
		if _, err := os.Lstat(filepath.Join(dir, "x.lock.lock")); err == nil {
			t.Fatalf("x.lock.lock was created (%s)", when)
		}
	}

	// hold holds x.lock: flock -n x.lock is busy.
	holder, _ := startHold(t, dir, "run", "x.lock", "-c", gatedCommand)
	waitFor(t, filepath.Join(dir, "ready"))
	fl := exec.Command(flock, "-n", "x.lock", "true")
	fl.Dir = dir
	fl.Run()
	flockBusy := fl.ProcessState.ExitCode()
	if flockBusy != 1 {
		t.Errorf("flock -n x.lock true while hold run x.lock holds it: exit %d, want 1", flockBusy)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if code := waitExit(t, holder); code != 0 {
		t.Errorf("hold run x.lock: exit %d", code)
	}
	noDoubleLock("hold run x.lock")

	// flock(1) holds x.lock: hold run -n x.lock is busy, with flock's
	// exit status, and status names flock(1)'s pid.
	fl = startGatedFlock(t, flock, dir, "x.lock")
	if r := runHold(t, dir, "run", "-n", "x.lock", "--", "true"); r.code != flockBusy {
		t.Errorf("hold run -n x.lock while flock(1) holds it: exit %d (%s), want %d as flock -n gives", r.code, r.stderr, flockBusy)
	}
	r := runHold(t, dir, "status", "x.lock")
	if !strings.Contains(r.stdout, "x.lock: held") || !strings.Contains(r.stdout, fmt.Sprintf("pid %d", fl.Process.Pid)) {
		t.Errorf("hold status x.lock while flock(1) (pid %d) holds it:\n%s%s", fl.Process.Pid, r.stdout, r.stderr)
	}
	if r := runHold(t, dir, "ls", "."); !strings.Contains(r.stdout, "x.lock") {
		t.Errorf("hold ls while flock(1) holds x.lock:\n%s%s", r.stdout, r.stderr)
	}
	runHold(t, dir, "break", "x.lock")
	noDoubleLock("status, ls and break of x.lock")
}

// TestDotLockCommandsWriteSurvives: `hold run x.lock` on a new x.lock
// writes its owner record there, and the command then writes the file
// (x.lock is the user's file by name). Releasing the lock must not put
// hold's past record over what the command wrote.
func TestDotLockCommandsWriteSurvives(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runHold(t, dir, "run", "x.lock", "-c", "echo 1 > x.lock"); r.code != 0 {
		t.Fatalf("hold run x.lock: exit %d: %s", r.code, r.stderr)
	}
	if got := readFile(t, filepath.Join(dir, "x.lock")); got != "1\n" {
		t.Errorf("x.lock holds %q after the command wrote \"1\\n\" into it", got)
	}
}
