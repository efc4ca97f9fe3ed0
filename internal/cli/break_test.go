//go:build unix

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hold break and hold status on portable (directory) locks.
func TestBreakAndStatusOfDirectoryLocks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, _ := holdCommand(t, dir, "--protocol", "dir")
	pid := fmt.Sprintf("pid %d", holder.Process.Pid)

	// status finds the directory lock without being told the protocol.
	r := runHold(t, dir, "status", "T")
	if r.code != 0 || !strings.Contains(r.stdout, "held exclusive") || !strings.Contains(r.stdout, "protocol:  dir") || !strings.Contains(r.stdout, pid) {
		t.Fatalf("status of a directory lock: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// A live holder is refused, named.
	r = runHold(t, dir, "break", "T")
	if r.code != exitConflict || !strings.Contains(r.stderr, pid) || !strings.Contains(r.stderr, "alive") {
		t.Fatalf("break of a live lock: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "T.lock", "owner.json")); err != nil {
		t.Fatalf("a refused break touched the lock: %v", err)
	}
	// --force prints the record, then removes the lock.
	r = runHold(t, dir, "break", "--force", "T")
	if r.code != 0 || !strings.Contains(r.stdout, pid) || !strings.Contains(r.stdout, "removed") {
		t.Fatalf("break --force: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, holder)

	// An ownerless directory (a dead proper-lockfile holder) past the stale
	// time is stale and is broken without --force.
	lock := filepath.Join(dir, "T.lock")
	os.RemoveAll(lock)
	os.Mkdir(lock, 0o777)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(lock, old, old)
	r = runHold(t, dir, "status", "--json", "T")
	if !strings.Contains(r.stdout, `"state":"stale"`) || !strings.Contains(r.stdout, `"protocol":"dir"`) {
		t.Fatalf("status of an abandoned directory lock: %s%s", r.stdout, r.stderr)
	}
	r = runHold(t, dir, "break", "T")
	if r.code != 0 {
		t.Fatalf("break of a stale lock: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if _, err := os.Lstat(lock); !os.IsNotExist(err) {
		t.Fatalf("stale lock still there: %v", err)
	}

	// Nothing there: nothing to do.
	if r = runHold(t, dir, "break", "T"); r.code != 0 {
		t.Fatalf("break of no lock: exit %d\n%s", r.code, r.stderr)
	}
	// A kernel lock cannot be broken.
	if r = runHold(t, dir, "run", "T", "--", "true"); r.code != 0 {
		t.Fatal(r.stderr)
	}
	if r = runHold(t, dir, "break", "T"); r.code != exitLockError {
		t.Fatalf("break of a kernel lock file: exit %d\n%s", r.code, r.stderr)
	}
	// Locking works here; only breaking does not apply, and the message
	// must say that rather than that locking is not supported.
	if strings.Contains(r.stderr, "not supported") || !strings.Contains(r.stderr, "a kernel lock cannot be broken") {
		t.Errorf("break of a kernel lock says %q", r.stderr)
	}
}
