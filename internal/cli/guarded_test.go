//go:build unix

package cli

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/internal/testenv"
)

// Tests of `hold append` and `hold update`. They use the hold binary that
// TestMain builds, and /bin/sh and tr as filters: both are on every unix.

// runHoldIn runs the hold binary in dir with stdin and waits for it.
func runHoldIn(t *testing.T, dir, stdin string, args ...string) result {
	t.Helper()
	return runBounded(t, func(ctx context.Context) *exec.Cmd {
		cmd := exec.CommandContext(ctx, holdBin, args...)
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(stdin)
		return cmd
	})
}

// ourTemps lists hold's temp files beside file.
func ourTemps(t *testing.T, file string) []string {
	m, _ := filepath.Glob(filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".hold-*.tmp"))
	return m
}

// runConcurrently runs procs goroutines, each starting each hold processes
// in turn with the arguments args(p, i) returns, and fails on the first
// error.
func runConcurrently(t *testing.T, dir string, procs, each int, args func(p, i int) []string) {
	t.Helper()
	errs := make(chan error, procs)
	for p := range procs {
		go func() {
			for i := range each {
				cmd := exec.Command(holdBin, args(p, i)...)
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- fmt.Errorf("hold %v: %v: %s", cmd.Args[1:], err, out)
					return
				}
			}
			errs <- nil
		}()
	}
	timeout := time.After(10 * hangLimit)
	for range procs {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-timeout:
			t.Fatal("processes did not finish")
		}
	}
}

// TestAppendManyProcesses: 32 processes run `hold append` 100 times each
// on one file; every record must be there exactly once, whole.
func TestAppendManyProcesses(t *testing.T) {
	t.Parallel()
	const procs, each = 32, 100
	dir := t.TempDir()
	// Records vary in length so that they straddle buffer boundaries.
	word := func(p, i int) string { return strings.Repeat(string(rune('a'+i%26)), 10+(p*31+i*17)%400) }
	runConcurrently(t, dir, procs, each, func(p, i int) []string {
		return []string{"append", "queue.md", fmt.Sprintf("p%d", p), fmt.Sprintf("r%d", i), word(p, i)}
	})
	lines := strings.Split(strings.TrimSuffix(readFile(t, filepath.Join(dir, "queue.md")), "\n"), "\n")
	if len(lines) != procs*each {
		t.Errorf("%d lines, want %d", len(lines), procs*each)
	}
	seen := map[string]bool{}
	for n, line := range lines {
		var p, i int
		var w string
		if k, _ := fmt.Sscanf(line, "p%d r%d %s", &p, &i, &w); k != 3 || line != fmt.Sprintf("p%d r%d %s", p, i, word(p, i)) {
			t.Fatalf("line %d is torn or interleaved: %.80q", n+1, line)
		}
		if seen[line] {
			t.Fatalf("line %d appears twice: %.40q", n+1, line)
		}
		seen[line] = true
	}
	if len(seen) != procs*each {
		t.Errorf("%d distinct records, want %d", len(seen), procs*each)
	}
}

// incrementFilter reads {"n":N} and prints {"n":N+1}, with nothing but sh.
const incrementFilter = `IFS= read -r line; n=${line#*:}; n=${n%\}}; printf '{"n":%d}\n' $((n+1))`

// TestUpdateManyProcesses: 16 processes run `hold update` 50 times each,
// each incrementing a number in a JSON file; no increment may be lost.
func TestUpdateManyProcesses(t *testing.T) {
	t.Parallel()
	const procs, each = 16, 50
	dir := t.TempDir()
	file := filepath.Join(dir, "counter.json")
	os.WriteFile(file, []byte(`{"n":0}`+"\n"), 0o644)
	runConcurrently(t, dir, procs, each, func(p, i int) []string {
		return []string{"update", "counter.json", "--", "sh", "-c", incrementFilter}
	})
	if got, want := readFile(t, file), fmt.Sprintf(`{"n":%d}`+"\n", procs*each); got != want {
		t.Errorf("counter %q, want %q: updates were lost", got, want)
	}
	if tmp := ourTemps(t, file); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}
}

// TestUpdateSIGKILLAtRandomMoments kills `hold update` of a large file at
// random moments: the file must always be exactly the old or the new
// content, and the next successful update must leave no temp file.
func TestUpdateSIGKILLAtRandomMoments(t *testing.T) {
	t.Parallel()
	const trials = 50
	dir := t.TempDir()
	file := filepath.Join(dir, "big.txt")
	lower := bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog\n"), (4<<20)/44)
	upper := bytes.ToUpper(lower)
	os.WriteFile(file, lower, 0o644)
	swapCase := []string{"update", "big.txt", "--", "tr", "a-zA-Z", "A-Za-z"}

	start := time.Now()
	if r := runHold(t, dir, swapCase...); r.code != 0 {
		t.Fatalf("uninterrupted update: exit %d: %s", r.code, r.stderr)
	}
	full := time.Since(start)

	var sawOld, sawNew, temps int
	for range trials {
		before, _ := os.ReadFile(file)
		cmd := exec.Command(holdBin, swapCase...)
		cmd.Dir = dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(full) * 3 / 2)))
		cmd.Process.Kill()
		cmd.Wait()
		got, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case bytes.Equal(got, before):
			sawOld++
		case bytes.Equal(got, lower), bytes.Equal(got, upper):
			sawNew++
		default:
			t.Fatalf("after SIGKILL the file is neither old nor new content (%d bytes)", len(got))
		}
		temps += len(ourTemps(t, file))
	}
	t.Logf("one update took %v; %d kills: %d left the old content, %d the new; temp files seen after kills: %d (summed)",
		full, trials, sawOld, sawNew, temps)
	if r := runHold(t, dir, swapCase...); r.code != 0 {
		t.Fatalf("update after the kills: exit %d: %s", r.code, r.stderr)
	}
	if tmp := ourTemps(t, file); len(tmp) > 0 {
		t.Errorf("temp files left after a successful update: %v", tmp)
	}
}

func TestUpdateFilterFailures(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.json")
	const original = `{"keep":true}` + "\n"
	os.WriteFile(file, []byte(original), 0o644)
	cases := []struct {
		name   string
		filter []string
		code   int
		stderr []string
	}{
		{"exits non-zero", []string{"sh", "-c", "cat >/dev/null; echo 'jq: parse error' >&2; exit 3"}, 3,
			[]string{"jq: parse error", "exited with status 3", "left unchanged"}},
		{"prints nothing", []string{"sh", "-c", "cat >/dev/null"}, exitEmptyOutput,
			[]string{"printed nothing", "--allow-empty", "left unchanged"}},
		{"cannot start", []string{"./no-such-filter"}, 69,
			[]string{"cannot run ./no-such-filter"}},
		{"killed by a signal", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9,
			[]string{"was killed", "left unchanged"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runHold(t, dir, append([]string{"update", "f.json", "--"}, c.filter...)...)
			if r.code != c.code {
				t.Errorf("exit %d, want %d; stderr: %s", r.code, c.code, r.stderr)
			}
			for _, s := range c.stderr {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("stderr lacks %q: %s", s, r.stderr)
				}
			}
			if got := readFile(t, file); got != original {
				t.Errorf("file changed to %q", got)
			}
			if tmp := ourTemps(t, file); len(tmp) > 0 {
				t.Errorf("temp files left: %v", tmp)
			}
		})
	}

	// Empty output is accepted when asked for.
	if r := runHold(t, dir, "update", "--allow-empty", "f.json", "--", "sh", "-c", "cat >/dev/null"); r.code != 0 {
		t.Fatalf("--allow-empty: exit %d: %s", r.code, r.stderr)
	}
	if got := readFile(t, file); got != "" {
		t.Errorf("--allow-empty left %q", got)
	}
}

// TestUpdateSIGTERMWhileFilterRuns: the filter (and what it started) is
// killed, the file is untouched, and hold says why with 128+SIGTERM.
func TestUpdateSIGTERMWhileFilterRuns(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("original\n"), 0o644)
	// The filter starts a child of its own and records both pids.
	filter := `sleep 60 & echo "$$ $!" > pids.tmp; mv pids.tmp pids; wait`
	cmd, stderr := startHold(t, dir, "update", "f", "--", "sh", "-c", filter)
	waitFor(t, filepath.Join(dir, "pids"))
	var shPid, sleepPid int
	fmt.Sscan(readFile(t, filepath.Join(dir, "pids")), &shPid, &sleepPid)
	cmd.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, cmd); code != 128+int(syscall.SIGTERM) {
		t.Errorf("exit %d, want %d", code, 128+int(syscall.SIGTERM))
	}
	msg := stderr()
	for _, s := range []string{"SIGTERM", "killed", "left unchanged"} {
		if !strings.Contains(msg, s) {
			t.Errorf("message lacks %q: %s", s, msg)
		}
	}
	if got := readFile(t, file); got != "original\n" {
		t.Errorf("file changed to %q", got)
	}
	for _, pid := range []int{shPid, sleepPid} {
		// A process SIGKILLed an instant before hold exited may still
		// be on its way out on a loaded machine: allow it a moment.
		for deadline := time.Now().Add(5 * time.Second); processExists(pid) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		if processExists(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Errorf("filter process %d outlived hold by 5s", pid)
		}
	}
	if tmp := ourTemps(t, file); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}
}

// TestUpdateSIGKILLKillsFilter: even a hold killed outright takes its
// filter with it (Linux: PR_SET_PDEATHSIG), and the file is untouched.
func TestUpdateSIGKILLKillsFilter(t *testing.T) {
	if !isLinux() {
		t.Skip("only Linux can tie a child's life to its parent")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("original\n"), 0o644)
	cmd, _ := startHold(t, dir, "update", "f", "--", "sh", "-c", `echo $$ > pid.tmp; mv pid.tmp pid; exec sleep 60`)
	waitFor(t, filepath.Join(dir, "pid"))
	var pid int
	fmt.Sscan(readFile(t, filepath.Join(dir, "pid")), &pid)
	cmd.Process.Kill()
	waitExit(t, cmd)
	deadline := time.Now().Add(hangLimit)
	for processExists(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("filter %d outlived a killed hold", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := readFile(t, file); got != "original\n" {
		t.Errorf("file changed to %q", got)
	}
}

func TestUpdateCLIFiles(t *testing.T) {
	dir := t.TempDir()
	// A symlink: the file it points to changes, the link stays a link.
	os.Mkdir(filepath.Join(dir, "data"), 0o755)
	os.WriteFile(filepath.Join(dir, "data", "real"), []byte("a\n"), 0o640)
	os.Symlink("data/real", filepath.Join(dir, "link"))
	if r := runHold(t, dir, "update", "link", "--", "sed", "s/a/b/"); r.code != 0 {
		t.Fatalf("update through a symlink: exit %d: %s", r.code, r.stderr)
	}
	if fi, _ := os.Lstat(filepath.Join(dir, "link")); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the link is no longer a link")
	}
	if got := readFile(t, filepath.Join(dir, "data", "real")); got != "b\n" {
		t.Errorf("target %q", got)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "data", "real")); fi.Mode().Perm() != 0o640 {
		t.Errorf("permission %v, want 0640", fi.Mode().Perm())
	}

	// A missing file starts empty, or fails with --must-exist.
	if r := runHold(t, dir, "update", "new", "--", "sh", "-c", "cat; echo first"); r.code != 0 {
		t.Fatalf("missing file: exit %d: %s", r.code, r.stderr)
	}
	if got := readFile(t, filepath.Join(dir, "new")); got != "first\n" {
		t.Errorf("new file %q", got)
	}
	if r := runHold(t, dir, "update", "--must-exist", "absent", "--", "cat"); r.code != 66 || !strings.Contains(r.stderr, "absent") {
		t.Errorf("--must-exist on a missing file: exit %d, want 66: %s", r.code, r.stderr)
	}

	// A directory is refused before any lock file is made beside it.
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	if r := runHold(t, dir, "update", "d", "--", "cat"); r.code == 0 || !strings.Contains(r.stderr, "is a directory") {
		t.Errorf("directory: exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "d.lock")); err == nil {
		t.Error("a lock file was made beside a directory")
	}

	// A read-only file is refused, even for root.
	os.WriteFile(filepath.Join(dir, "ro"), []byte("keep\n"), 0o444)
	os.Chmod(filepath.Join(dir, "ro"), 0o444)
	if r := runHold(t, dir, "update", "ro", "--", "sed", "s/keep/lost/"); r.code != 66 || !strings.Contains(r.stderr, "chmod") {
		t.Errorf("read-only file: exit %d, want 66: %s", r.code, r.stderr)
	}
	if got := readFile(t, filepath.Join(dir, "ro")); got != "keep\n" {
		t.Errorf("read-only file changed: %q", got)
	}

	// Usage errors.
	for _, args := range [][]string{{"update"}, {"update", "f"}, {"update", "f", "--"}, {"update", "-s", "f", "--", "cat"}} {
		if r := runHold(t, dir, args...); r.code != 64 {
			t.Errorf("hold %v: exit %d, want 64: %s", args, r.code, r.stderr)
		}
	}
}

func TestAppendCLI(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "log")
	steps := []struct {
		stdin string
		args  []string
	}{
		{"", []string{"append", "log", "hello", "world"}},
		{"", []string{"append", "--no-newline", "log", "no", "newline"}},
		{"", []string{"append", "log", "--", "-n", "is text here"}},
		{"from stdin\nwhole\n", []string{"append", "log", "-"}},
	}
	for _, s := range steps {
		if r := runHoldIn(t, dir, s.stdin, s.args...); r.code != 0 {
			t.Fatalf("hold %v: exit %d: %s", s.args, r.code, r.stderr)
		}
	}
	if got, want := readFile(t, file), "hello world\nno newline-n is text here\nfrom stdin\nwhole\n"; got != want {
		t.Errorf("content %q, want %q", got, want)
	}
	if r := runHold(t, dir, "append", "--must-exist", "absent", "x"); r.code != 66 {
		t.Errorf("--must-exist: exit %d, want 66: %s", r.code, r.stderr)
	}
	for _, args := range [][]string{{"append"}, {"append", "log"}, {"append", "-s", "log", "x"}} {
		if r := runHold(t, dir, args...); r.code != 64 {
			t.Errorf("hold %v: exit %d, want 64: %s", args, r.code, r.stderr)
		}
	}
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	if r := runHold(t, dir, "append", "d", "x"); r.code == 0 || !strings.Contains(r.stderr, "is a directory") {
		t.Errorf("directory: exit %d: %s", r.code, r.stderr)
	}
}

// TestAppendWaitsForRun: hold append takes the same lock as hold run, so
// it waits for a running command and -n reports the holder.
func TestAppendWaitsForRun(t *testing.T) {
	dir := t.TempDir()
	runCmd, _ := startHold(t, dir, "run", "log", "-c", `echo ready > ready.tmp; mv ready.tmp ready; while [ ! -e go ]; do sleep 0.02; done; echo from-run >> log`)
	waitFor(t, filepath.Join(dir, "ready"))
	if r := runHold(t, dir, "append", "--verbose", "-n", "log", "too", "early"); r.code != 1 || !strings.Contains(r.stderr, "held by") {
		t.Errorf("append -n while run holds the lock: exit %d, want 1 naming the holder: %s", r.code, r.stderr)
	}
	var wg sync.WaitGroup
	var r result
	wg.Add(1)
	go func() { defer wg.Done(); r = runHold(t, dir, "append", "log", "after-run") }()
	time.Sleep(200 * time.Millisecond) // makes it likely that append waits; correctness does not depend on it
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	wg.Wait()
	waitExit(t, runCmd)
	if r.code != 0 {
		t.Fatalf("append: exit %d: %s", r.code, r.stderr)
	}
	// The lock is held until the command has written, so the append
	// cannot come first.
	if got := readFile(t, filepath.Join(dir, "log")); got != "from-run\nafter-run\n" {
		t.Errorf("log %q, want the run's line before the append's", got)
	}
}

// The tests below are about what an update keeps of the file besides its
// content, and what it refuses. Several need root (to own files and links
// as other users and to run hold as one); CI runs them as root.

// otherUID and otherGID own files and links in these tests: a user other
// than the one running them and other than nobody, who runs hold.
const otherUID, otherGID, nobodyID = 4242, 4343, 65534

func needRootCLI(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: " + why + " (CI runs the tests as root)")
	}
}

// holdAsNobody returns a copy of the hold binary that user nobody may run,
// in a directory of its own: TestMain's is private to root.
func holdAsNobody(t *testing.T) string {
	t.Helper()
	dir := publicDir(t)
	bin := filepath.Join(dir, "hold")
	data, err := os.ReadFile(holdBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// runHoldAs runs bin as the user and groups in cred, in dir.
func runHoldAs(t *testing.T, bin string, cred *syscall.Credential, dir string, args ...string) result {
	t.Helper()
	return runBounded(t, func(ctx context.Context) *exec.Cmd {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		return cmd
	})
}

// publicDir is a directory every user may enter (see testenv.PublicDir).
func publicDir(t *testing.T) string { return testenv.PublicDir(t, "hold-guarded-") }

// TestGuardedCLIPlantedSymlink: a link someone else planted in a sticky
// world-writable directory leads neither `hold update` nor `hold append`
// to its target (the kernel's fs.protected_symlinks rule); one of the
// caller's own is followed.
func TestGuardedCLIPlantedSymlink(t *testing.T) {
	needRootCLI(t, "giving a symlink another owner (chown -h)")
	dir := t.TempDir()
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(tmp, 0o755)
	os.Chmod(tmp, 0o777|os.ModeSticky)
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("original\n"), 0o644)
	os.Symlink(target, filepath.Join(tmp, "link"))
	if err := os.Lchown(filepath.Join(tmp, "link"), otherUID, otherUID); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"update", "tmp/link", "--", "sed", "s/original/overwritten/"},
		{"append", "tmp/link", "appended"},
	} {
		r := runHold(t, dir, args...)
		if r.code != 66 {
			t.Errorf("hold %s through a planted link: exit %d, want 66; stderr: %s", args[0], r.code, r.stderr)
		}
		for _, want := range []string{"uid 4242", "sticky world-writable", "protected_symlinks", "readlink"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("hold %s: message does not say %q: %s", args[0], want, r.stderr)
			}
		}
	}
	if got := readFile(t, target); got != "original\n" {
		t.Fatalf("target changed to %q", got)
	}
	os.Lchown(filepath.Join(tmp, "link"), 0, 0)
	if r := runHold(t, dir, "update", "tmp/link", "--", "sed", "s/original/mine/"); r.code != 0 {
		t.Fatalf("update through the caller's own link: exit %d: %s", r.code, r.stderr)
	}
	if got := readFile(t, target); got != "mine\n" {
		t.Errorf("target %q", got)
	}
}

// TestUpdateCLIHardLink: a hard-linked FILE is refused, and replaced with
// --allow-split.
func TestUpdateCLIHardLink(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("old\n"), 0o644)
	os.Link(filepath.Join(dir, "a"), filepath.Join(dir, "b"))
	r := runHold(t, dir, "update", "a", "--", "sed", "s/old/new/")
	if r.code != 66 || !strings.Contains(r.stderr, "hard links") || !strings.Contains(r.stderr, "--allow-split") {
		t.Errorf("update of a hard-linked file: exit %d, want 66 with a hint: %s", r.code, r.stderr)
	}
	if a, b := readFile(t, filepath.Join(dir, "a")), readFile(t, filepath.Join(dir, "b")); a != "old\n" || b != "old\n" {
		t.Fatalf("refused update changed a file: a %q, b %q", a, b)
	}
	if r := runHold(t, dir, "update", "--allow-split", "a", "--", "sed", "s/old/new/"); r.code != 0 {
		t.Fatalf("--allow-split: exit %d: %s", r.code, r.stderr)
	}
	if a, b := readFile(t, filepath.Join(dir, "a")), readFile(t, filepath.Join(dir, "b")); a != "new\n" || b != "old\n" {
		t.Errorf("after --allow-split: a %q, b %q", a, b)
	}
}

// TestUpdateCLIKeepsACL: hold update keeps the file's POSIX ACL and user.*
// attributes (written here as the kernel stores them, as setfacl would).
func TestUpdateCLIKeepsACL(t *testing.T) {
	if !isLinux() {
		t.Skip("the ACL's xattr format is Linux's")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("a\n"), 0o640)
	// user::rw- user:4242:rw- group::r-- mask::rw- other::---
	acl := []byte{2, 0, 0, 0}
	for _, e := range [][3]uint32{{1, 6, 0xffffffff}, {2, 6, otherUID}, {4, 4, 0xffffffff}, {0x10, 6, 0xffffffff}, {0x20, 0, 0xffffffff}} {
		acl = append(acl, byte(e[0]), byte(e[0]>>8), byte(e[1]), byte(e[1]>>8), byte(e[2]), byte(e[2]>>8), byte(e[2]>>16), byte(e[2]>>24))
	}
	for name, value := range map[string][]byte{"system.posix_acl_access": acl, "user.note": []byte("kept")} {
		if err := unix.Setxattr(file, name, value, 0); err != nil {
			t.Fatalf("setxattr %s: %v", name, err)
		}
	}
	if r := runHold(t, dir, "update", "f", "--", "sed", "s/a/b/"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if got := readFile(t, file); got != "b\n" {
		t.Fatalf("content %q", got)
	}
	for name, want := range map[string][]byte{"system.posix_acl_access": acl, "user.note": []byte("kept")} {
		buf := make([]byte, 256)
		n, err := unix.Getxattr(file, name, buf)
		if err != nil || !bytes.Equal(buf[:n], want) {
			t.Errorf("%s after the update: %x, %v; want %x", name, buf[:max(n, 0)], err, want)
		}
	}
}

// otherUsersFile makes "tracker" (v1) in a public directory of group
// otherGID: the file belongs to otherUID and is writable by its group, and
// its lock file is writable by all. It returns the directory, the file and
// the credentials of nobody as a member of that group.
func otherUsersFile(t *testing.T) (dir, file string, member *syscall.Credential) {
	t.Helper()
	dir = publicDir(t)
	os.Chown(dir, 0, otherGID)
	os.Chmod(dir, 0o775)
	file = filepath.Join(dir, "tracker")
	os.WriteFile(file, []byte("v1\n"), 0o664)
	os.Chmod(file, 0o664)
	os.Chown(file, otherUID, otherGID)
	os.WriteFile(file+".lock", nil, 0o666)
	os.Chmod(file+".lock", 0o666)
	return dir, file, &syscall.Credential{Uid: nobodyID, Gid: nobodyID, Groups: []uint32{otherGID}}
}

// TestUpdateCLIGroupMember: nobody, a member of the file's group, may not
// make another user's file its own without saying so: refused (66), and
// with --allow-owner-change done, the group kept and the change reported.
func TestUpdateCLIGroupMember(t *testing.T) {
	needRootCLI(t, "files of another user, and hold run as a third")
	bin := holdAsNobody(t)
	dir, file, member := otherUsersFile(t)

	r := runHoldAs(t, bin, member, dir, "update", "tracker", "--", "sed", "s/v1/v2/")
	if r.code != 66 || !strings.Contains(r.stderr, "uid 4242") || !strings.Contains(r.stderr, "--allow-owner-change") {
		t.Errorf("update of another user's file: exit %d, want 66 naming the owner and the flag: %s", r.code, r.stderr)
	}
	if got := readFile(t, file); got != "v1\n" {
		t.Fatalf("refused update changed the file to %q", got)
	}
	r = runHoldAs(t, bin, member, dir, "update", "--allow-owner-change", "tracker", "--", "sed", "s/v1/v2/")
	if r.code != 0 || !strings.Contains(r.stderr, "warning") || !strings.Contains(r.stderr, "now belongs to uid 65534") {
		t.Errorf("--allow-owner-change: exit %d, want 0 and a note of the new owner: %s", r.code, r.stderr)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != nobodyID || st.Gid != otherGID {
		t.Errorf("owner %d:%d, want %d:%d (the group kept)", st.Uid, st.Gid, nobodyID, otherGID)
	}
}

// TestUpdateCLIUnreadableDirectory: in a directory its user may write but
// not read, the update is renamed into place; it must be reported as done
// (exit 0), never as failed with the file "left unchanged".
func TestUpdateCLIUnreadableDirectory(t *testing.T) {
	bin, cred := holdBin, (*syscall.Credential)(nil)
	if os.Geteuid() == 0 {
		bin, cred = holdAsNobody(t), &syscall.Credential{Uid: nobodyID, Gid: nobodyID}
	}
	base := publicDir(t)
	dir := filepath.Join(base, "wx")
	os.Mkdir(dir, 0o755)
	file := filepath.Join(dir, "f")
	os.WriteFile(file, []byte("v1\n"), 0o644)
	if cred != nil {
		os.Chown(dir, nobodyID, nobodyID)
		os.Chown(file, nobodyID, nobodyID)
	}
	os.Chmod(dir, 0o333)
	os.WriteFile(filepath.Join(base, "f.lock"), nil, 0o666)
	os.Chmod(filepath.Join(base, "f.lock"), 0o666)
	r := runHoldAs(t, bin, cred, base, "update", "--lock-file", "f.lock", "wx/f", "--", "sed", "s/v1/v2/")
	if r.code != 0 || strings.Contains(r.stderr, "unchanged") {
		t.Errorf("update in a write-only directory: exit %d, want 0: %s", r.code, r.stderr)
	}
	if got := readFile(t, file); got != "v2\n" {
		t.Errorf("content %q", got)
	}
}

// TestGuardedCLIMemory: `hold append -` and `hold update` stream; neither
// holds its input in memory. 64 MiB through each must add well under the
// input's size to hold's peak resident size (before, it added about twice
// the input for append and four times for update). The peak is compared
// with that of the same command on a small input, because a child's peak
// starts at its parent's size at the fork (this test binary's).
func TestGuardedCLIMemory(t *testing.T) {
	if !isLinux() {
		t.Skip("ru_maxrss is in kilobytes on Linux only")
	}
	const size = 64 << 20
	dir := t.TempDir()
	line := []byte(strings.Repeat("0123456789abcdef", 7) + "\n")
	write := func(name string, n int) {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for range n / len(line) {
			if _, err := f.Write(line); err != nil {
				t.Fatal(err)
			}
		}
	}
	peak := func(stdin string, args ...string) int64 {
		t.Helper()
		cmd := exec.Command(holdBin, args...)
		cmd.Dir = dir
		if stdin != "" {
			in, err := os.Open(filepath.Join(dir, stdin))
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			cmd.Stdin = in
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("hold %v: %v: %s", args, err, out)
		}
		return cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10 // kilobytes on Linux
	}
	write("small", 1<<10)
	write("big", size)
	type peaks struct{ small, big int64 }
	measured := map[string]peaks{
		"append -": {peak("small", "append", "log", "-"), peak("big", "append", "log", "-")},
		"update":   {peak("", "update", "small", "--", "tr", "a-f", "A-F"), peak("", "update", "big", "--", "tr", "a-f", "A-F")},
	}
	// The log has the small input and the big one, as they were before the
	// updates.
	logged, _ := os.ReadFile(filepath.Join(dir, "log"))
	if want := bytes.Repeat(line, 1<<10/len(line)+size/len(line)); !bytes.Equal(logged, want) {
		t.Fatalf("the log is %d bytes, not the small input and the big one (%d bytes)", len(logged), len(want))
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "big")); !bytes.Equal(got[:len(line)], bytes.ToUpper(line)) {
		t.Fatalf("update did not apply: %q", got[:len(line)])
	}
	for op, p := range measured {
		t.Logf("hold %s: peak resident size %d KiB for 1 KiB, %d KiB for %d MiB", op, p.small>>10, p.big>>10, size>>20)
		if g := p.big - p.small; g > size/4 {
			t.Errorf("hold %s of %d MiB added %d MiB to the peak resident size: the input is held in memory", op, size>>20, g>>20)
		}
	}
}
