//go:build unix

package hold_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/internal/testenv"
)

// TestDotLockInDirectoryNotWritable: a lock file whose name ends in
// ".lock", in a directory where its user may not create a companion (a
// system's lock file that users may lock), is locked itself alone, as
// flock(1) locks it, rather than refused: nobody can rename it there
// either. The worker runs as another user, since root may write anywhere.
func TestDotLockInDirectoryNotWritable(t *testing.T) {
	testenv.NeedRoot(t, "only another user is refused a directory's write permission")
	base := worldDir(t)
	dir := filepath.Join(base, "ro")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "sys.lock")
	if err := os.WriteFile(target, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	w := startOtherUserWorker(t, base, "CORE_TARGET="+target)
	if r := w.report(t, time.Minute); r.Err != "" {
		t.Fatalf("worker (uid %d) holding %s in a directory it may not write: %s", otherUser, target, r.Err)
	}
	fd, err := unix.Open(target, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Errorf("flock(2) of %s while the worker holds it: %v, want EWOULDBLOCK", target, err)
	}
	if fileExists(target + ".lock") {
		t.Errorf("%s.lock was made", target)
	}
	w.cmd.Process.Kill()
	w.wait(t, time.Minute)
}
