package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestPortableHolderInOtherPIDNamespace: a portable-lock holder in a
// container that shares the host's name (here a new pid namespace, same
// UTS namespace) has a pid that means nothing outside it: its hold is pid
// 1 there. status must not call its lock stale, break without --force
// must refuse it, and a waiter must find it busy; all judge it by its
// heartbeat, as a holder on another host.
func TestPortableHolderInOtherPIDNamespace(t *testing.T) {
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("unshare (util-linux) is not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("a pid namespace needs root (CI runs as root)")
	}
	dir := t.TempDir()
	// --kill-child: when unshare dies, so does the namespace's pid 1
	// (hold), and the kernel then ends everything else in it.
	holder := exec.Command(unshare, "--pid", "--fork", "--mount-proc", "--kill-child", holdBin,
		"run", "--protocol", "dir", "t", "--", "sh", "-c", "touch held; exec sleep 60")
	holder.Dir = dir
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if holder.ProcessState == nil {
			holder.Process.Signal(syscall.SIGKILL)
			holder.Wait()
		}
	})
	waitFor(t, filepath.Join(dir, "held"))
	rec := readFile(t, filepath.Join(dir, "t.lock", "owner.json"))
	if !strings.Contains(rec, `"pid_ns":`) || !strings.Contains(rec, `"boot_id":`) {
		t.Errorf("the owner record does not say where its pid lives: %s", rec)
	}

	st := runHold(t, dir, "status", "--protocol", "dir", "t")
	if strings.Contains(st.stdout, "stale") || !strings.Contains(st.stdout, "held") {
		t.Errorf("status of a live holder in another pid namespace (exit %d):\n%s%s", st.code, st.stdout, st.stderr)
	}
	if r := runHold(t, dir, "run", "--protocol", "dir", "-n", "t", "--", "true"); r.code != exitConflict {
		t.Errorf("a waiter got exit %d, want %d (busy): %s", r.code, exitConflict, r.stderr)
	}
	br := runHold(t, dir, "break", "--protocol", "dir", "t")
	if br.code == 0 {
		t.Errorf("break without --force removed a live holder's lock:\n%s%s", br.stdout, br.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "t.lock", "owner.json")); err != nil {
		t.Errorf("the holder's lock is gone: %v", err)
	}
}
