//go:build linux

package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold"
)

// TestRunNestedDeadlock: a command of hold run that waits for the same lock,
// itself or through a child, would wait for ever (hold run releases only
// when its command ends): it fails at once with the deadlock status,
// naming the holder and why. A lock held by an ancestor that is no such
// runner (this test process) is waited for as usual.
func TestRunNestedDeadlock(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"run", "T", "--", holdBin, "run", "T", "--", "true"},
		{"run", "T", "--", "sh", "-c", holdBin + " run -w 60 T -- true"},
		{"run", "T", "--", holdBin, "update", "T", "--", "cat"},
	} {
		r := runHold(t, dir, args...)
		if r.code != exitDeadlock || !strings.Contains(r.stderr, "deadlock: held by pid") || !strings.Contains(r.stderr, "is an ancestor of this process (pid") || !strings.Contains(r.stderr, ") that waits for it to end") {
			t.Errorf("hold %v: exit %d, stderr %q; want %d and a deadlock message naming the holder", args, r.code, r.stderr, exitDeadlock)
		}
	}
	// Not a runner: this process holds the lock, and may release it.
	l, err := hold.TryAcquire(filepath.Join(dir, "U"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if r := runHold(t, dir, "run", "-w", "0.3", "U", "--", "true"); r.code != exitConflict {
		t.Errorf("a wait for a lock an ordinary ancestor holds: exit %d, stderr %q; want %d (timed out)", r.code, r.stderr, exitConflict)
	}
}

// TestRunSlotsNestedDeadlock: a wait for a slot of a semaphore whose
// every slot, or whose lock itself, is held by hold runs that wait for
// the waiter fails at once, as the plain case does; one with a slot free,
// or held by someone else, waits.
func TestRunSlotsNestedDeadlock(t *testing.T) {
	dir := t.TempDir()
	h := holdBin
	for _, args := range [][]string{
		{"run", "T", "--", h, "run", "-w", "20", "--slots", "2", "T", "--", "true"},
		{"run", "--slots", "2", "T", "--", h, "run", "--slots", "2", "T", "--", h, "run", "-w", "20", "--slots", "2", "T", "--", "true"},
		{"run", "--slots", "2", "T", "--", "sh", "-c", h + " run --slots 2 T -- sh -c '" + h + " run -w 20 --slots 2 T -- true'"},
	} {
		r := runHold(t, dir, args...)
		if r.code != exitDeadlock || !strings.Contains(r.stderr, "deadlock") || !strings.Contains(r.stderr, "that wait") {
			t.Errorf("hold %v: exit %d, stderr %q; want %d and a deadlock message", args, r.code, r.stderr, exitDeadlock)
		}
	}
	if r := runHold(t, dir, "run", "--slots", "2", "T", "--", h, "run", "--slots", "2", "T", "--", "true"); r.code != 0 {
		t.Errorf("a slot taken while another is free: exit %d, stderr %q; want 0", r.code, r.stderr)
	}
	// A slot held by this process, which is no runner, may be released.
	l, err := hold.TryAcquire(filepath.Join(dir, "T"), hold.Slots(2))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if r := runHold(t, dir, "run", "--slots", "2", "T", "--", h, "run", "-w", "0.5", "--slots", "2", "T", "--", "true"); r.code != exitConflict {
		t.Errorf("a wait for a slot an ordinary ancestor holds: exit %d, stderr %q; want %d (timed out)", r.code, r.stderr, exitConflict)
	}
}

// TestRunNoFalseDeadlock: a wait that would end is never called a
// deadlock. The ancestor's command unlocks the descriptor it inherited a
// moment later from a background subshell; the ancestor released and an
// unrelated flock(1) holds the lock while the record still names the
// ancestor; a background successor asks while its parent's command still
// runs: each waits and then gets the lock (exit 0), where they exited 70.
func TestRunNoFalseDeadlock(t *testing.T) {
	dir := t.TempDir()
	h := holdBin
	for _, c := range []struct{ name, script string }{
		{"descriptor unlocked later", `(sleep 1; flock -u 3) & ` + h + ` run -w 20 a -- true`},
		{"kernel holder unrelated", `flock -u 3; (flock a.lock sleep 2 &); sleep 0.3; ` + h + ` run -w 20 a -- true`},
	} {
		r := runHold(t, dir, "run", "a", "--", "sh", "-c", c.script)
		if r.code != 0 {
			t.Errorf("%s: exit %d, stderr %q; want the wait to end with the lock (0)", c.name, r.code, r.stderr)
		}
	}
	// A background successor: it gets the lock once its parent's
	// command has ended, every time.
	for i := range 4 {
		mark := filepath.Join(dir, "got"+strconv.Itoa(i))
		r := runHold(t, dir, "run", "a", "--", "sh", "-c", h+` run -w 20 a -- sh -c 'echo $? > `+mark+`' 3>&- 2>`+mark+`.err &`)
		if r.code != 0 {
			t.Fatalf("the parent: exit %d, stderr %q", r.code, r.stderr)
		}
		deadline := time.Now().Add(hangLimit)
		for {
			b, err := os.ReadFile(mark)
			if err == nil && len(b) > 0 {
				break
			}
			if eb, _ := os.ReadFile(mark + ".err"); len(eb) > 0 {
				t.Fatalf("run %d: the background successor failed: %s", i, eb)
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d: the background successor never ran its command", i)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestRunDeadlockFoundWhileWaiting: a cycle that forms while the wait is
// on (the shell that started the nested hold run in the background goes
// on to wait for it) is the deadlock status then, not a wait for ever.
func TestRunDeadlockFoundWhileWaiting(t *testing.T) {
	dir := t.TempDir()
	r := runHold(t, dir, "run", "a", "--", "sh", "-c", holdBin+` run -w 60 a -- true & p=$!; sleep 0.5; wait $p; echo "inner $?"`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "inner "+strconv.Itoa(exitDeadlock) || !strings.Contains(r.stderr, "is an ancestor of this process") {
		t.Errorf("exit %d, stdout %q, stderr %q; want the inner hold run to exit %d once its shell waits for it", r.code, r.stdout, r.stderr, exitDeadlock)
	}
}

// TestRunDeadlockAsAnotherUser: a user who may not look at every
// process's descriptors (root's) still has a true cycle reported, and a
// wait that would end still waits: what decides is the processes that
// could have inherited the lock's description.
func TestRunDeadlockAsAnotherUser(t *testing.T) {
	needRootCLI(t, "running hold as another user")
	bin := holdAsNobody(t)
	dir := filepath.Join(publicDir(t), "work")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, nobodyID, nobodyID); err != nil {
		t.Fatal(err)
	}
	nobody := &syscall.Credential{Uid: nobodyID, Gid: nobodyID}
	r := runHoldAs(t, bin, nobody, dir, "run", "T", "--", bin, "run", "-w", "60", "T", "--", "true")
	if r.code != exitDeadlock || !strings.Contains(r.stderr, "is an ancestor of this process") {
		t.Errorf("a nested hold run as nobody: exit %d, stderr %q; want %d", r.code, r.stderr, exitDeadlock)
	}
	r = runHoldAs(t, bin, nobody, dir, "run", "T", "--", "sh", "-c", `(sleep 1; flock -u 3) & `+bin+` run -w 20 T -- true`)
	if r.code != 0 {
		t.Errorf("a wait for a descriptor unlocked later, as nobody: exit %d, stderr %q; want 0", r.code, r.stderr)
	}
}
