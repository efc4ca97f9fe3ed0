package cli

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// TestReleasedRecordAcrossProtocols: one path used by the kernel and the
// portable protocol in turn. Each takes the lock the other released at
// once (the kernel's released record is not a leftover to be aged out),
// and the fencing token keeps rising across them.
func TestReleasedRecordAcrossProtocols(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A released record is free at once; a leftover would be waited on
	// for the stale time, which this makes unmistakable.
	env := []string{"HOLD_DIR_STALE=30s"}
	var last uint64
	for i, proto := range []string{"flock", "dir", "flock", "dir", "dir", "flock"} {
		start := time.Now()
		r := holdEnv(t, dir, env, "run", "--protocol", proto, "-w", "20", "T", "-c", `echo $HOLD_TOKEN`)
		took := time.Since(start)
		if r.code != 0 {
			t.Fatalf("run %d (%s): exit %d: %s", i, proto, r.code, r.stderr)
		}
		var tok uint64
		for _, c := range strings.TrimSpace(r.stdout) {
			tok = tok*10 + uint64(c-'0')
		}
		if tok <= last {
			t.Errorf("run %d (%s): token %q after %d: tokens must keep rising across protocols", i, proto, strings.TrimSpace(r.stdout), last)
		}
		if took > 15*time.Second {
			t.Errorf("run %d (%s) took %v: it waited for a released lock", i, proto, took)
		}
		last = tok
	}
}

// TestReleasedRecordUnderKernelLock: a released record in a lock file that
// a kernel lock holds (flock(1), which writes no record of its own) is not
// free: the portable protocol leaves it alone.
func TestReleasedRecordUnderKernelLock(t *testing.T) {
	t.Parallel()
	flock := testenv.LookPath(t, "flock", "not installed (apt package util-linux)")
	dir := t.TempDir()
	if r := runHold(t, dir, "run", "T", "--", "true"); r.code != 0 {
		t.Fatalf("kernel hold run: exit %d: %s", r.code, r.stderr)
	}
	holder := exec.Command(flock, "T.lock", "sh", "-c", "touch held; sleep 30")
	holder.Dir = dir
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	waitFor(t, filepath.Join(dir, "held"))
	r := holdEnv(t, dir, []string{"HOLD_DIR_STALE=30s"}, "run", "--protocol", "dir", "-n", "T", "--", "true")
	if r.code != exitConflict {
		t.Errorf("portable lock over a held kernel lock's released record: exit %d, want %d (busy): %s", r.code, exitConflict, r.stderr)
	}
}
