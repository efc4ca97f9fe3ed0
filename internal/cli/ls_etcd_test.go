//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// hold ls etcd://HOST/PREFIX lists the etcd locks under the prefix, by
// way of hold-remote, with their holders and waiters.
func TestLsEtcdPrefix(t *testing.T) {
	t.Parallel()
	base := "etcd://" + startEtcd(t) + "/ls"
	dir := t.TempDir()
	holder, _ := startHold(t, dir, "run", base+"/deploy", "-c", gatedCommand)
	waitFor(t, filepath.Join(dir, "ready"))
	waiter, _ := startHold(t, dir, "run", "-w", "60", base+"/deploy", "--", "true")

	deadline := time.Now().Add(hangLimit)
	for {
		got := lsJSON(t, dir, base)
		l, ok := got["ls/deploy"]
		if ok && *l.Waiters == 1 {
			if len(got) != 1 || l.Protocol != "etcd" || l.State != "held exclusive" || l.Token == 0 ||
				l.Holder == nil || l.Holder.PID != holder.Process.Pid {
				t.Fatalf("hold ls %s: %+v", base, got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("hold ls %s never showed ls/deploy with one waiter: %+v", base, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, holder)
	waitExit(t, waiter)
	if got := lsJSON(t, dir, base); len(got) != 0 {
		t.Fatalf("hold ls %s after every holder left: %+v", base, got)
	}
}
