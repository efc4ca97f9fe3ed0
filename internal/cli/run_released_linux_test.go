package cli

import (
	"strings"
	"testing"
	"time"
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
