package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

// These tests run one after another, not in parallel: under wine one
// wineserver serves every process of every test, and each test starts
// many already.

// hold run's exit statuses, a busy lock naming its holder, and what
// status and ls say about it, with real hold.exe processes.
func TestWindowsRunStatusLs(t *testing.T) {
	dir := t.TempDir()
	cmdline := append([]string{"run", "T", "--"}, childCommand(t)...)
	if r := runHold(t, dir, "exit:7", cmdline...); r.code != 7 {
		t.Errorf("hold run T -- (exit 7): exit %d (%s), want the command's 7", r.code, r.stderr)
	}
	if r := runHold(t, dir, "exit:0", "run", "T", "--", "no-such-command-hold-test"); r.code != exitExecFailed {
		t.Errorf("hold run of a missing command: exit %d (%s), want %d", r.code, r.stderr, exitExecFailed)
	}
	if r := runHold(t, dir, "exit:0", "run", "-E", "256", "T", "--", "x"); r.code != exitUsage {
		t.Errorf("hold run -E 256: exit %d, want %d", r.code, exitUsage)
	}

	holder := gatedHolder(t, dir, "--field", "job=nightly")
	pid := fmt.Sprintf("pid %d", holder.Process.Pid)
	busy := append([]string{"run", "-n", "T", "--"}, childCommand(t)...)
	// A conflict is quiet, as flock(1)'s is; --verbose names the holder.
	if r := runHold(t, dir, "exit:0", busy...); r.code != 1 {
		t.Errorf("hold run -n while held: exit %d, stderr %q; want 1", r.code, r.stderr)
	}
	if r := runHold(t, dir, "exit:0", append([]string{"run", "--verbose", "-n", "T", "--"}, childCommand(t)...)...); r.code != 1 || !strings.Contains(r.stderr, pid) {
		t.Errorf("hold run --verbose -n while held: exit %d, stderr %q; want 1 naming %s", r.code, r.stderr, pid)
	}
	if r := runHold(t, dir, "exit:0", append([]string{"run", "-n", "-E", "42", "T", "--"}, childCommand(t)...)...); r.code != 42 {
		t.Errorf("hold run -n -E 42 while held: exit %d, want 42", r.code)
	}
	if r := runHold(t, dir, "exit:0", append([]string{"run", "--verbose", "-w", "0.5", "T", "--"}, childCommand(t)...)...); r.code != 1 || !strings.Contains(r.stderr, "timed out") {
		t.Errorf("hold run --verbose -w 0.5 while held: exit %d, stderr %q; want 1 and a timeout", r.code, r.stderr)
	}
	r := runHold(t, dir, "", "status", "T")
	for _, want := range []string{"held exclusive", pid, "alive", "nightly"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("status of a held lock (exit %d) lacks %q:\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
	if r := runHold(t, dir, "", "status", "--json", "T"); !strings.Contains(r.stdout, `"held":true`) {
		t.Errorf("status --json of a held lock: %s%s", r.stdout, r.stderr)
	}
	r = runHold(t, dir, "", "ls")
	if r.code != 0 || !strings.Contains(r.stdout, "T.lock") || !strings.Contains(r.stdout, strconv.Itoa(holder.Process.Pid)) {
		t.Errorf("ls while T is held: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}

	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if code := waitExit(t, holder); code != 0 {
		t.Fatalf("holder exit %d", code)
	}
	if r := runHold(t, dir, "", "status", "T"); !strings.Contains(r.stdout, "free") {
		t.Errorf("status after release: %s%s", r.stdout, r.stderr)
	}
	if r := runHold(t, dir, "exit:0", busy...); r.code != 0 {
		t.Errorf("hold run -n after release: exit %d: %s", r.code, r.stderr)
	}
}

// Killing the hold that holds the lock frees it for every waiter: on
// Windows the lock stays with hold (the command cannot inherit it).
func TestWindowsKilledHoldFreesWaiters(t *testing.T) {
	dir := t.TempDir()
	holder := gatedHolder(t, dir)
	const n = 3
	waiters := make([]*os.Process, 0, n)
	codes := make(chan int, n)
	for range n {
		w := startHold(t, dir, "exit:0", append([]string{"run", "-w", "120", "T", "--"}, childCommand(t)...)...)
		waiters = append(waiters, w.Process)
		go func() { codes <- waitExit(t, w) }()
	}
	// The waiters wait: none can finish while the holder lives.
	time.Sleep(500 * time.Millisecond)
	select {
	case code := <-codes:
		t.Fatalf("a waiter exited (%d) while the lock was held", code)
	default:
	}
	holder.Process.Kill()
	waitExit(t, holder)
	for range waiters {
		if code := <-codes; code != 0 {
			t.Errorf("waiter after the holder was killed: exit %d, want 0", code)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Error("the held command finished before the kill; the test proved nothing")
	}
	// Nothing kills the command with hold on Windows: let it finish, and
	// wait for it, since a directory that is a process's current
	// directory cannot be removed.
	var pid int
	fmt.Sscan(readFile(t, filepath.Join(dir, "ready")), &pid)
	orphan, err := os.FindProcess(pid)
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if err == nil {
		done := make(chan struct{})
		go func() { orphan.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(hangLimit):
			orphan.Kill()
			t.Errorf("the command (pid %d) did not finish within %v", pid, hangLimit)
		}
	}
}

// Concurrent read-modify-writes, each under hold run, lose nothing.
func TestWindowsRunLosesNoIncrement(t *testing.T) {
	const procs, each = 8, 8
	dir := t.TempDir()
	cmdline := append([]string{"run", "counter", "--"}, childCommand(t)...)
	parallelRuns(t, dir, "counter", procs, each, func(int, int) []string { return cmdline })
	if got := strings.TrimSpace(readFile(t, filepath.Join(dir, "counter"))); got != strconv.Itoa(procs*each) {
		t.Fatalf("counter = %s after %d locked increments", got, procs*each)
	}
}

// hold update under contention keeps every update, and a reader never
// finds the file missing, empty or torn while the updates replace it.
func TestWindowsUpdateUnderContention(t *testing.T) {
	const procs, each = 8, 8
	dir := t.TempDir()
	counter := filepath.Join(dir, "counter")
	if err := os.WriteFile(counter, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	var reads, refused atomic.Int64
	readerDone := make(chan error, 1)
	go func() {
		// os.ReadFile opens without FILE_SHARE_DELETE, as most Windows
		// programs do: each read also blocks a replacement while it runs.
		// An open in the instant of a replacement may be refused (a
		// sharing violation, or access denied to a file pending
		// deletion), as Windows refuses it: a reader retries. The file
		// is never missing, empty or partial.
		for !stop.Load() {
			b, err := os.ReadFile(counter)
			if errors.Is(err, windows.ERROR_SHARING_VIOLATION) || errors.Is(err, windows.ERROR_ACCESS_DENIED) {
				refused.Add(1)
				continue
			}
			if err == nil {
				_, err = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			if err != nil {
				readerDone <- fmt.Errorf("a reader found the file %q: %v", b, err)
				return
			}
			reads.Add(1)
			time.Sleep(time.Millisecond)
		}
		readerDone <- nil
	}()
	cmdline := append([]string{"update", "counter", "--"}, childCommand(t)...)
	parallelRuns(t, dir, "increment", procs, each, func(int, int) []string { return cmdline })
	stop.Store(true)
	if err := <-readerDone; err != nil {
		t.Error(err)
	}
	t.Logf("%d whole reads during the updates; %d opens refused for a moment", reads.Load(), refused.Load())
	if got := strings.TrimSpace(readFile(t, counter)); got != strconv.Itoa(procs*each) {
		t.Fatalf("counter = %s after %d updates", got, procs*each)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".counter*")); len(m) > 0 {
		t.Errorf("temp files left behind: %v", m)
	}
}

// hold append under contention keeps every line whole.
func TestWindowsAppendUnderContention(t *testing.T) {
	const procs, each = 8, 8
	dir := t.TempDir()
	parallelRuns(t, dir, "", procs, each, func(i, j int) []string {
		return []string{"append", "log", fmt.Sprintf("line-%d-%d", i, j)}
	})
	lines := strings.Split(strings.TrimSuffix(readFile(t, filepath.Join(dir, "log")), "\n"), "\n")
	seen := map[string]bool{}
	for _, l := range lines {
		seen[strings.TrimRight(l, "\r")] = true
	}
	for i := range procs {
		for j := range each {
			if l := fmt.Sprintf("line-%d-%d", i, j); !seen[l] {
				t.Errorf("line %s missing", l)
			}
		}
	}
	if len(lines) != procs*each {
		t.Errorf("%d lines, want %d:\n%s", len(lines), procs*each, strings.Join(lines, "\n"))
	}
}
