//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunNoticesRemovedKernelLockFile: the kernel lock file of a running
// `hold run` is deleted (rm, a temp cleaner), so a second holder gets in
// at once; the first must say that its lock was lost and why, stop its
// command, and exit 65, as for any lost lock. The same for a lock file
// replaced by another.
func TestRunNoticesRemovedKernelLockFile(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"removed", "replaced"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			holder, stderr := startHold(t, dir, "run", "T", "-c", gatedCommand)
			waitFor(t, filepath.Join(dir, "ready"))
			t.Cleanup(func() { os.WriteFile(filepath.Join(dir, "go"), nil, 0o644) })
			lock := filepath.Join(dir, "T.lock")
			if how == "removed" {
				if err := os.Remove(lock); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := os.WriteFile(lock+".new", nil, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(lock+".new", lock); err != nil {
					t.Fatal(err)
				}
			}
			// The lock now excludes nobody: a second holder gets in.
			if r := runHold(t, dir, "run", "-n", "T", "--", "true"); r.code != 0 {
				t.Fatalf("second holder: exit %d: %s", r.code, r.stderr)
			}
			code := waitExit(t, holder)
			msg := stderr()
			if code != exitLockError {
				t.Errorf("first holder: exit %d, want %d (lost lock): %s", code, exitLockError, msg)
			}
			if !strings.Contains(msg, "lost") || !strings.Contains(msg, "removed or replaced") || !strings.Contains(msg, "SIGTERM") {
				t.Errorf("first holder's stderr does not say the lock file was removed or replaced and the command stopped: %q", msg)
			}
			if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
				t.Errorf("the command ran to its end after the lock was lost")
			}
		})
	}
}
