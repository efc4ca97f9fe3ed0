//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 53: a target named X.lock is locked itself too (its own lock), so
// that its holders exclude the holders of X. While `hold run --protocol
// dir T` held the portable lock directory T.lock, `hold run -n T.lock --
// cmd` ran cmd: the own lock skipped a directory, where --lock-file T.lock
// was refused as a directory lock of the portable protocol. Every mode
// is refused now, whether the companion T.lock.lock exists or not, and
// runs nothing.
func TestOwnLockRefusesPortableLockDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, _ := holdCommand(t, dir, "--protocol", "dir")
	for _, companion := range []bool{false, true} {
		if companion {
			os.WriteFile(filepath.Join(dir, "T.lock.lock"), nil, 0o644)
		}
		for _, flags := range [][]string{{"-n"}, {"-w", "1"}, {"-s", "-n"}, {"--fair", "-n"}, {"--slots", "2", "-n"}, {"-n", "--protocol", "dir"}} {
			args := append(append([]string{"run"}, flags...), "T.lock", "--", "touch", "ran")
			r := runHold(t, dir, args...)
			if r.code != exitCannotOpen || !strings.Contains(r.stderr, "directory lock of the portable protocol") ||
				!strings.Contains(r.stderr, "lock T with --protocol dir") {
				t.Errorf("hold %v (companion made: %v) while T.lock is a held portable lock: exit %d, %s; want %d saying to lock T with --protocol dir",
					args, companion, r.code, r.stderr, exitCannotOpen)
			}
			if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
				t.Fatalf("hold %v ran its command beside the portable holder of T.lock", args)
			}
		}
		if !companion {
			// Refused before the lock file was made beside it (a fair
			// or slot waiter's queue file comes before it, and stays
			// as a queue's does).
			if _, err := os.Lstat(filepath.Join(dir, "T.lock.lock")); err == nil {
				t.Errorf("refused requests made T.lock.lock")
			}
		}
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if code := waitExit(t, holder); code != 0 {
		t.Errorf("holder exited %d", code)
	}
}
