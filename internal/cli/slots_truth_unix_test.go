//go:build unix

package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// The semaphore's promises to its users, each once broken (issue 53): one
// token sequence per target whatever the mode, a token handed out under a
// lock rather than from a value read before a wait, N kept while a slot
// taken by hand is held, a target named X.lock locked itself in every
// mode, and files removed under the holders noticed before anyone holds
// beside them.

// tokenCommand announces its token and slot in ready.TOKEN and holds
// until the test creates go.TOKEN, so that the test lets each holder go
// on its own.
const tokenCommand = `echo "$HOLD_SLOT $HOLD_TOKEN" > r.$$ && mv r.$$ ready.$HOLD_TOKEN; i=0; while [ ! -e go.$HOLD_TOKEN ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done`

// One sequence of tokens per target, whatever each holder asks for: on
// 4bf87b7 kernel holders alternating plain and slots printed 1 2 3 1 2 4 3.
func TestSlotsOneTokenSequence(t *testing.T) {
	t.Parallel()
	for _, proto := range [][]string{nil, {"--fair"}, {"--protocol", "dir"}} {
		t.Run(strings.Join(append([]string{"kernel"}, proto...), " "), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			var got []string
			for _, mode := range [][]string{{"--slots", "2"}, {"--slots", "2"}, {"--slots", "2"}, nil, {"--slots", "1"}, {"--slots", "2"}, nil, {"--slots", "3"}, nil} {
				args := append(append(append([]string{"run"}, proto...), mode...), "T", "--", "sh", "-c", `echo $HOLD_TOKEN`)
				r := runHold(t, dir, args...)
				if r.code != 0 {
					t.Fatalf("hold %v: exit %d: %s", args, r.code, r.stderr)
				}
				got = append(got, strings.TrimSpace(r.stdout))
			}
			for i, tok := range got {
				if tok != strconv.Itoa(i+1) {
					t.Fatalf("tokens of alternating plain and slot holders: %v, want 1 to %d in order", got, len(got))
				}
			}
		})
	}
}

// A waiter at the front of the slot queue, stopped while it waits for a
// slot, is passed by another (the queue's stall rule); when it resumes
// and takes a slot, its token is still one nobody else had. On 4bf87b7 it
// used the token floor it had read before the stop, and two live holders
// had token 3.
func TestSlotsStoppedWaiterToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tokenHolder := func() *exec.Cmd {
		cmd, _ := startHold(t, dir, "run", "--slots", "2", "T", "-c", tokenCommand)
		return cmd
	}
	t.Cleanup(func() {
		for i := 1; i < 10; i++ {
			os.WriteFile(filepath.Join(dir, "go."+strconv.Itoa(i)), nil, 0o644)
		}
	})
	tokenHolder()
	waitFor(t, filepath.Join(dir, "ready.1"))
	tokenHolder()
	waitFor(t, filepath.Join(dir, "ready.2"))
	a := tokenHolder()
	time.Sleep(500 * time.Millisecond) // a reaches the front and waits on the slots
	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b := tokenHolder()
	time.Sleep(300 * time.Millisecond)
	os.WriteFile(filepath.Join(dir, "go.1"), nil, 0o644)
	// b takes slot 0 once the stall rule lets it pass the stopped a.
	waitFor(t, filepath.Join(dir, "ready.3"))
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "go.2"), nil, 0o644)
	waitFor(t, filepath.Join(dir, "ready.4"))
	for _, tok := range []string{"3", "4"} {
		var slot, token int
		fmt.Sscan(readFile(t, filepath.Join(dir, "ready."+tok)), &slot, &token)
		if strconv.Itoa(token) != tok {
			t.Errorf("ready.%s holds token %d", tok, token)
		}
	}
	os.WriteFile(filepath.Join(dir, "go.3"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "go.4"), nil, 0o644)
	for _, c := range []*exec.Cmd{a, b} {
		if code := waitExit(t, c); code != 0 {
			t.Errorf("%v: exit %d", c.Args, code)
		}
	}
	// Each token was announced in a file of its own, so a repeated one
	// would have left fewer files than holders.
	if got, _ := filepath.Glob(filepath.Join(dir, "ready.*")); len(got) != 4 {
		t.Errorf("4 holders announced %d tokens: %v", len(got), got)
	}
}

// A slot taken by hand as docs/cli.md shows (flock -s T.lock flock
// T.lock.slotK) keeps N: a request with another N is refused while it is
// held. On 4bf87b7 two --slots 2 holders got in beside a hand-taken slot 3
// of 4: three holders of a 2-slot semaphore.
func TestSlotsHandTakenSlotKeepsN(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runHold(t, dir, "run", "--slots", "4", "T", "--", "true"); r.code != 0 {
		t.Fatalf("hold run --slots 4: exit %d: %s", r.code, r.stderr)
	}
	startHandSlot(t, dir, 3)
	for range 2 {
		r := runHold(t, dir, "run", "-n", "--slots", "2", "T", "--", "true")
		if r.code != 64 || !strings.Contains(r.stderr, "4 in use") {
			t.Fatalf("hold run --slots 2 beside slot 3 of 4 taken by hand: exit %d, want 64 naming 4 in use: %s", r.code, r.stderr)
		}
	}
}

// A semaphore on a target named X.lock holds X.lock itself too, shared, as
// a plain lock of it holds it exclusively: flock(1) and a plain holder of
// X (whose lock file X.lock is) stay out. On 4bf87b7 both got in.
func TestSlotsDotLockTargetOwnLock(t *testing.T) {
	t.Parallel()
	flock := testenv.LookPath(t, "flock", "flock(1) is not installed (util-linux)")
	dir := t.TempDir()
	h, _ := startHold(t, dir, "run", "--slots", "2", "app.lock", "-c", gatedCommand)
	waitFor(t, filepath.Join(dir, "ready"))
	if r := runIn(t, dir, nil, flock, "-n", "app.lock", "true"); r.code != 1 {
		t.Errorf("flock -n app.lock beside a slot of app.lock: exit %d, want 1", r.code)
	}
	if r := runHold(t, dir, "run", "-n", "app", "--", "true"); r.code != 1 {
		t.Errorf("hold run -n app beside a slot of app.lock: exit %d, want 1: %s", r.code, r.stderr)
	}
	if r := runIn(t, dir, nil, flock, "-n", "-s", "app.lock", "true"); r.code != 0 {
		t.Errorf("flock -n -s app.lock beside a slot of app.lock: exit %d, want 0 (slots hold it shared)", r.code)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if code := waitExit(t, h); code != 0 {
		t.Errorf("the slot holder: exit %d", code)
	}
}

// flockPath is flock(1)'s path, or the test skips.
func flockPath(t *testing.T) string {
	return testenv.LookPath(t, "flock", "flock(1) is not installed (util-linux)")
}

// The files a semaphore stands on, removed under its holders: a removed
// lock file lets no plain holder in while slots are held, and the slot
// holders are told they lost it (65); a removed count file lets no other
// N in, nor restarts the tokens.
func TestSlotsFilesRemoved(t *testing.T) {
	t.Parallel()
	t.Run("lock file", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		s, serr := startHold(t, dir, "run", "--slots", "2", "T", "-c", tokenCommand)
		waitFor(t, filepath.Join(dir, "ready.1"))
		if err := os.Remove(filepath.Join(dir, "T.lock")); err != nil {
			t.Fatal(err)
		}
		if r := runHold(t, dir, "run", "-n", "T", "--", "true"); r.code != 1 {
			t.Errorf("hold run -n T after T.lock was removed under a slot holder: exit %d, want 1: %s", r.code, r.stderr)
		}
		if r := runHold(t, dir, "run", "--verbose", "-w", "0.1", "T", "--", "true"); r.code != 1 || !strings.Contains(r.stderr, "removed or replaced") {
			t.Errorf("hold run -w 0.1 T after T.lock was removed under a slot holder: exit %d, want 1 saying why: %s", r.code, r.stderr)
		}
		// A waiting plain holder gets in once the slot holder has been
		// told and let go, never beside it: the slot file is free then.
		r := runHold(t, dir, "run", "-w", "20", "T", "--", flockPath(t), "-n", "-s", "T.lock.slot0", "echo", "free")
		if r.code != 0 || strings.TrimSpace(r.stdout) != "free" {
			t.Errorf("the plain holder ran while slot 0 was held (%q), or failed: exit %d: %s", r.stdout, r.code, r.stderr)
		}
		if code := waitExit(t, s); code != 65 {
			t.Errorf("the slot holder whose lock file was removed: exit %d, want 65: %s", code, serr())
		}
	})
	t.Run("count file", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		var holders []*exec.Cmd
		for i := 1; i <= 2; i++ {
			c, _ := startHold(t, dir, "run", "--slots", "2", "T", "-c", tokenCommand)
			waitFor(t, filepath.Join(dir, "ready."+strconv.Itoa(i)))
			holders = append(holders, c)
		}
		if err := os.Remove(filepath.Join(dir, "T.lock.slots")); err != nil {
			t.Fatal(err)
		}
		if r := runHold(t, dir, "run", "-n", "--slots", "5", "T", "--", "true"); r.code != 1 {
			t.Errorf("hold run -n --slots 5 after the count file of a full 2-slot semaphore was removed: exit %d, want 1: %s", r.code, r.stderr)
		}
		for _, c := range holders {
			if code := waitExit(t, c); code != 65 {
				t.Errorf("a slot holder whose count file was removed: exit %d, want 65", code)
			}
		}
		r := runHold(t, dir, "run", "--slots", "5", "T", "--", "sh", "-c", `echo $HOLD_TOKEN`)
		if r.code != 0 || strings.TrimSpace(r.stdout) != "3" {
			t.Errorf("the next holder after the count file was made anew: exit %d, token %q, want 3: %s", r.code, r.stdout, r.stderr)
		}
	})
}

// What a try and a plain lock say of a semaphore is true (issue 53's
// smaller cases): -n takes a slot that is free even while the first
// waiter in line is stopped (on 4bf87b7 it said busy after 2 s); another
// N is a usage error (64) with waiters queued as without them (it was a
// busy 1, which a cron job retries for ever); and a plain -n names the
// slot holders, not the waiters, who hold the lock file shared while
// they wait.
func TestSlotsTryTells(t *testing.T) {
	t.Parallel()
	for _, proto := range [][]string{nil, {"--fair"}} {
		t.Run(strings.Join(append([]string{"kernel"}, proto...), " "), func(t *testing.T) {
			t.Parallel()
			slotsTryTells(t, proto)
		})
	}
}

func slotsTryTells(t *testing.T, proto []string) {
	dir := t.TempDir()
	run := func(args ...string) []string { return append(append([]string{args[0]}, proto...), args[1:]...) }
	t.Cleanup(func() {
		for i := 1; i < 10; i++ {
			os.WriteFile(filepath.Join(dir, "go."+strconv.Itoa(i)), nil, 0o644)
		}
	})
	var pids []int
	for i := 1; i <= 2; i++ {
		c, _ := startHold(t, dir, run("run", "--slots", "2", "T", "-c", tokenCommand)...)
		waitFor(t, filepath.Join(dir, "ready."+strconv.Itoa(i)))
		pids = append(pids, c.Process.Pid)
	}
	// status --json names no single holder of a semaphore held by two.
	r := runHold(t, dir, "status", "--json", "T")
	var st map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st["holder"] != nil || st["slots_held"] != float64(2) {
		t.Errorf("status --json of a semaphore held by two: %v: %s", err, r.stdout)
	}
	w, _ := startHold(t, dir, run("run", "--slots", "2", "T", "-c", tokenCommand)...)
	time.Sleep(500 * time.Millisecond) // w waits at the front of the queue
	r = runHold(t, dir, run("run", "--verbose", "-n", "T", "--", "true")...)
	if r.code != 1 || strings.Contains(r.stderr, strconv.Itoa(w.Process.Pid)) ||
		!strings.Contains(r.stderr, strconv.Itoa(pids[0])) || !strings.Contains(r.stderr, strconv.Itoa(pids[1])) {
		t.Errorf("plain -n on a full semaphore: exit %d, want 1 naming holders %v and not waiter %d: %s", r.code, pids, w.Process.Pid, r.stderr)
	}
	if r := runHold(t, dir, run("run", "-n", "--slots", "3", "T", "--", "true")...); r.code != 64 {
		t.Errorf("--slots 3 -n against a 2-slot semaphore with a waiter queued: exit %d, want 64: %s", r.code, r.stderr)
	}
	if err := w.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer w.Process.Signal(syscall.SIGCONT)
	os.WriteFile(filepath.Join(dir, "go.1"), nil, 0o644)
	r = runHold(t, dir, run("run", "-w", "20", "--slots", "2", "T", "--", "sh", "-c", `echo $HOLD_SLOT`)...)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "0" {
		t.Fatalf("a -w holder while slot 0 is free and the first waiter is stopped: exit %d, slot %q: %s", r.code, r.stdout, r.stderr)
	}
	r = runHold(t, dir, run("run", "-n", "--slots", "2", "T", "--", "sh", "-c", `echo $HOLD_SLOT`)...)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "0" {
		t.Errorf("-n while slot 0 is free and the first waiter is stopped: exit %d, slot %q, want 0: %s", r.code, r.stdout, r.stderr)
	}
}

// A count file this user may not write is a permission error that says
// which file and what to do (66), not "bad file descriptor" (71): every
// slot holder rewrites it with its token.
func TestSlotsCountFileNotWritable(t *testing.T) {
	t.Parallel()
	needRootCLI(t, "running hold as another user")
	bin := holdAsNobody(t)
	dir := filepath.Join(publicDir(t), "work")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	if r := runHold(t, dir, "run", "--slots", "2", "T", "--", "true"); r.code != 0 {
		t.Fatalf("hold run --slots 2: exit %d: %s", r.code, r.stderr)
	}
	for _, f := range []string{"T.lock", "T.lock.slot0", "T.lock.slot1", "T.lock.slots.queue"} {
		os.Chmod(filepath.Join(dir, f), 0o666)
	}
	os.Chmod(filepath.Join(dir, "T.lock.slots"), 0o644)
	nobody := &syscall.Credential{Uid: nobodyID, Gid: nobodyID}
	r := runHoldAs(t, bin, nobody, dir, "run", "--slots", "2", "T", "--", "true")
	if r.code != exitCannotOpen || !strings.Contains(r.stderr, "T.lock.slots") || !strings.Contains(r.stderr, "write access") {
		t.Errorf("a slot as nobody with a count file only root may write: exit %d, want %d naming the file and what to do: %s", r.code, exitCannotOpen, r.stderr)
	}
}

// With the lock file and the count file both removed while no one holds
// the semaphore, the next plain holder's token still continues the slots'
// (they keep their holders' last tokens): tokens never start again.
func TestSlotsTokensSurviveRemovedFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for range 3 {
		if r := runHold(t, dir, "run", "--slots", "2", "T", "--", "true"); r.code != 0 {
			t.Fatalf("hold run --slots 2: exit %d: %s", r.code, r.stderr)
		}
	}
	for _, f := range []string{"T.lock", "T.lock.slots"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	r := runHold(t, dir, "run", "T", "--", "sh", "-c", `echo $HOLD_TOKEN`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "4" {
		t.Errorf("a plain holder after T.lock and T.lock.slots were removed: exit %d, token %q, want 4: %s", r.code, r.stdout, r.stderr)
	}
}
