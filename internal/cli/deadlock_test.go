//go:build linux

package cli

import (
	"path/filepath"
	"strings"
	"testing"

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
		if r.code != exitDeadlock || !strings.Contains(r.stderr, "deadlock: held by pid") || !strings.Contains(r.stderr, "is an ancestor of this process that waits for it") {
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
