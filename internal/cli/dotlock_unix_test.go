//go:build unix

package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
// x.lock` reports flock(1)'s hold, naming its pid. hold's record goes to
// the companion x.lock.lock, never into x.lock, and status, ls and break
// create nothing.
func TestDotLockFlockInterop(t *testing.T) {
	t.Parallel()
	flock := testenv.LookPath(t, "flock", "flock(1) is not installed (util-linux)")
	dir := t.TempDir()
	nothingWritten := func(when string) {
		t.Helper()
		if b, err := os.ReadFile(filepath.Join(dir, "x.lock")); err != nil || len(b) != 0 {
			t.Fatalf("x.lock holds %q, %v (%s): hold wrote into it", b, err, when)
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
	nothingWritten("hold run x.lock")
	if _, err := os.Stat(filepath.Join(dir, "x.lock.lock")); err != nil {
		t.Errorf("hold run x.lock made no companion: %v", err)
	}

	// flock(1) holds x.lock: hold run -n x.lock is busy, with flock's
	// exit status, and status names flock(1)'s pid.
	fl = startGatedFlock(t, flock, dir, "x.lock")
	if r := runHold(t, dir, "run", "-n", "x.lock", "--", "true"); r.code != flockBusy {
		t.Errorf("hold run -n x.lock while flock(1) holds it: exit %d (%s), want %d as flock -n gives", r.code, r.stderr, flockBusy)
	}
	os.Remove(filepath.Join(dir, "x.lock.lock"))
	r := runHold(t, dir, "status", "x.lock")
	if !strings.Contains(r.stdout, "x.lock: held") || !strings.Contains(r.stdout, fmt.Sprintf("pid %d", fl.Process.Pid)) {
		t.Errorf("hold status x.lock while flock(1) (pid %d) holds it:\n%s%s", fl.Process.Pid, r.stdout, r.stderr)
	}
	if r := runHold(t, dir, "ls", "."); !strings.Contains(r.stdout, "x.lock") {
		t.Errorf("hold ls while flock(1) holds x.lock:\n%s%s", r.stdout, r.stderr)
	}
	runHold(t, dir, "break", "x.lock")
	nothingWritten("status, ls and break of x.lock")
	if _, err := os.Lstat(filepath.Join(dir, "x.lock.lock")); err == nil {
		t.Errorf("status, ls or break of x.lock made x.lock.lock")
	}
}

// TestDotLockCommandsWriteSurvives: `hold run x.lock` on a new x.lock
// creates it empty for its own kernel lock, and the command then writes
// the file (x.lock is the user's file by name). hold keeps its record in
// x.lock.lock, so nothing of hold's ever lands over what the command
// wrote.
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

// TestDotLockSavedByRename: a lock file of a package manager (yarn.lock,
// Cargo.lock) holds data, and its tool saves it by writing a new file and
// renaming it over the old one. `hold run yarn.lock` around such a tool
// stays one lock after the rename: a second `hold run -n` is busy, a
// waiting `hold run` starts only after the first command has ended, the
// first is not stopped for a lost lock (it exits 0), and the file holds
// what the tool wrote (hold writes nothing into it).
func TestDotLockSavedByRename(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lockFile := filepath.Join(dir, "yarn.lock")
	if err := os.WriteFile(lockFile, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The tool: save by rename, say so, then keep working until the
	// test lets it finish.
	const tool = `printf 'new\n' > yarn.lock.tmp && mv yarn.lock.tmp yarn.lock && ` + gatedCommand + `; echo first-end >> order`
	first, firstErr := startHold(t, dir, "run", "yarn.lock", "-c", tool)
	waitFor(t, filepath.Join(dir, "ready"))
	if r := runHold(t, dir, "run", "-n", "yarn.lock", "--", "true"); r.code != 1 {
		t.Errorf("hold run -n yarn.lock after the first holder's command renamed yarn.lock: exit %d (%s), want 1 (busy)", r.code, r.stderr)
	}
	if r := runHold(t, dir, "status", "yarn.lock"); !strings.Contains(r.stdout, "yarn.lock.lock: held exclusive") || !strings.Contains(r.stdout, fmt.Sprintf("pid %d", first.Process.Pid)) {
		t.Errorf("hold status yarn.lock while the first hold (pid %d) holds it:\n%s%s", first.Process.Pid, r.stdout, r.stderr)
	}
	// A second holder that waits: --verbose makes it say so once it has
	// waited a moment, which is how the test knows it waits.
	second, secondErr := startHold(t, dir, "run", "--verbose", "yarn.lock", "-c", `echo second-start >> order; cat yarn.lock > seen`)
	deadline := time.Now().Add(hangLimit)
	for !strings.Contains(secondErr(), "waiting") {
		if _, err := os.Stat(filepath.Join(dir, "seen")); err == nil {
			t.Fatalf("the second hold run yarn.lock ran its command while the first one's still ran:\n%s", secondErr())
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second hold run yarn.lock never said it waits:\n%s", secondErr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Long enough for hold's look at the lock (once a second) to have
	// seen the rename: the gate opens only after the second has waited.
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, first); code != 0 {
		t.Errorf("first hold run yarn.lock: exit %d, want 0:\n%s", code, firstErr())
	}
	if code := waitExit(t, second); code != 0 {
		t.Errorf("second hold run yarn.lock: exit %d, want 0:\n%s", code, secondErr())
	}
	if got := readFile(t, filepath.Join(dir, "order")); got != "first-end\nsecond-start\n" {
		t.Errorf("order of the two commands:\n%swant the first's end before the second's start", got)
	}
	if got := readFile(t, filepath.Join(dir, "seen")); got != "new\n" {
		t.Errorf("the second command saw yarn.lock holding %q, want what the tool wrote", got)
	}
	if got := readFile(t, lockFile); got != "new\n" {
		t.Errorf("yarn.lock holds %q, want what the tool wrote", got)
	}
}

// TestRunNamesFlockLockOfTarget: `flock F CMD` locks F itself, while
// `hold run F` locks F.lock, so the two do not exclude each other. When
// flock(1) holds F, hold run F says so and names --lock-file F: with
// --verbose, and on a terminal (a pty made by script(1)); in a script
// (stderr not a terminal) and with -q it says nothing. With --lock-file F
// it is busy, as flock(1)'s lock is then its own.
func TestRunNamesFlockLockOfTarget(t *testing.T) {
	t.Parallel()
	flock := testenv.LookPath(t, "flock", "flock(1) is not installed (util-linux)")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "local-lock-file"), []byte("data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fl := startGatedFlock(t, flock, dir, "local-lock-file")
	says := func(stderr string) bool {
		return strings.Contains(stderr, "local-lock-file itself is held exclusive by pid "+fmt.Sprint(fl.Process.Pid)) &&
			strings.Contains(stderr, "--lock-file local-lock-file")
	}
	r := runHold(t, dir, "run", "-x", "--verbose", "local-lock-file", "--", "true")
	if r.code != 0 || !says(r.stderr) {
		t.Errorf("hold run --verbose local-lock-file while flock(1) (pid %d) holds local-lock-file: exit %d, stderr:\n%swant exit 0 and a note naming the holder and --lock-file local-lock-file", fl.Process.Pid, r.code, r.stderr)
	}
	for _, args := range [][]string{{"run", "local-lock-file", "--", "true"}, {"run", "-q", "local-lock-file", "--", "true"}} {
		if r := runHold(t, dir, args...); r.code != 0 || r.stderr != "" {
			t.Errorf("hold %v off a terminal: exit %d, stderr %q; want 0 and nothing said", args, r.code, r.stderr)
		}
	}
	if r := runHold(t, dir, "run", "-n", "--lock-file", "local-lock-file", "--", "true"); r.code != 1 {
		t.Errorf("hold run -n --lock-file local-lock-file while flock(1) holds it: exit %d (%s), want 1", r.code, r.stderr)
	}
	script := testenv.LookPath(t, "script", "script(1) is not installed (bsdutils)")
	// script runs the command on a new pty and copies what it writes to
	// its own stdout.
	r = runIn(t, dir, nil, script, "-qec", holdBin+" run local-lock-file -- true", "/dev/null")
	if r.code != 0 || !says(r.stdout) {
		t.Errorf("hold run local-lock-file on a terminal while flock(1) holds local-lock-file: exit %d, output:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestDotLockOwnLockWaits: the kernel lock of app.lock is the lock path
// of "app" and the file "app.lock" is locked as besides its companion.
// A nested hold that waits for it while its ancestor holds it is the
// deadlock error at once, both ways; a hold that waits for it while
// flock(1) holds it names flock(1) as the holder, not itself (it holds
// the companion meanwhile).
func TestDotLockOwnLockWaits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, pair := range [][2]string{{"app", "app.lock"}, {"app.lock", "app"}} {
		r := runHold(t, dir, "run", pair[0], "--", holdBin, "run", "-w", "20", pair[1], "--", "true")
		if r.code != 70 || !strings.Contains(r.stderr, "deadlock") {
			t.Errorf("hold run %s -- hold run %s: exit %d (%s), want 70, a deadlock", pair[0], pair[1], r.code, r.stderr)
		}
	}
	flock := testenv.LookPath(t, "flock", "flock(1) is not installed (util-linux)")
	fl := startGatedFlock(t, flock, dir, "app.lock")
	cmd, stderr := startHold(t, dir, "run", "--verbose", "app.lock", "--", "true")
	want := fmt.Sprintf(" for app.lock, held exclusive by pid %d", fl.Process.Pid)
	deadline := time.Now().Add(hangLimit)
	for !strings.Contains(stderr(), "waiting") {
		if time.Now().After(deadline) {
			t.Fatalf("hold run --verbose app.lock while flock(1) holds app.lock said nothing of its wait:\n%s", stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(stderr(), want) {
		t.Errorf("hold run --verbose app.lock while flock(1) (pid %d) holds app.lock:\n%swant %q", fl.Process.Pid, stderr(), want)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if code := waitExit(t, cmd); code != 0 {
		t.Errorf("hold run app.lock once flock(1) let go: exit %d:\n%s", code, stderr())
	}
}
