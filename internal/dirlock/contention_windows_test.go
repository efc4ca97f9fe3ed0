package dirlock

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/randname"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/lock"
)

// The Windows tests re-execute this binary as a process that keeps a
// directory open (see openDirWorker).
const envOpenDir = "HOLD_DIRLOCK_OPEN_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envOpenDir); dir != "" {
		os.Exit(openDirWorker(dir))
	}
	os.Exit(testenv.Run(m))
}

// openDirWorker opens dir as an indexer or a virus scanner would (Go's
// os.Open: no FILE_SHARE_DELETE, so nobody may rename or remove the
// directory while it is open), says so by creating dir+".ready", and keeps
// it open until dir+".go" exists (a minute at most).
func openDirWorker(dir string) int {
	f, err := os.Open(dir)
	if err != nil {
		return 2
	}
	defer f.Close()
	if err := os.WriteFile(dir+".ready", nil, 0o644); err != nil {
		return 2
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(dir + ".go"); err == nil {
			break
		}
	}
	return 0
}

// winRequest builds what the public package would hand the protocol.
func winRequest(path string) *lock.Request {
	r := &lock.Request{Path: path, Owner: proc.Self()}
	r.Owner.ID = randname.Hex(16)
	return r
}

// Another process that has the lock directory open makes Windows refuse to
// rename or remove it (access denied, a sharing violation: EPERM and EBUSY
// to Node, which is how career-ops' dir-lock learned it). That is
// contention: the holder's release succeeds, and a waiter, or a reclaimer
// of a dead holder's lock, keeps waiting instead of failing, and gets the
// lock once the directory is closed.
func TestWindowsOpenDirectoryIsContention(t *testing.T) {
	// The other processes' handles close as they exit.
	path := filepath.Join(testenv.TempDir(t), "t.lock")
	p := New(Config{Stale: 300 * time.Millisecond, Grace: 150 * time.Millisecond, Heartbeat: 50 * time.Millisecond, MaxPoll: 20 * time.Millisecond})

	// A dead holder's lock, its directory held open by another process.
	if err := os.Mkdir(path, 0o777); err != nil {
		t.Fatal(err)
	}
	dead := testenv.DeadPID(t)
	stamp := `{"pid":` + strconv.Itoa(dead) + `,"token":"t","started_at":"2026-01-01T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(path, OwnerFile), []byte(stamp), 0o644); err != nil {
		t.Fatal(err)
	}
	opener := testenv.Command(envOpenDir + "=" + path)
	if err := opener.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(path+".go", nil, 0o644)
		opener.Wait()
	})
	testenv.Eventually(t, time.Minute, "the other process to open the directory", func() bool {
		_, err := os.Stat(path + ".ready")
		return err == nil
	})
	if err := os.Rename(path, path+".moved"); err == nil {
		os.Rename(path+".moved", path)
		t.Skip("this system renames a directory another process has open: no contention to test")
	}

	// The reclaimer waits through the refusals; it neither fails nor
	// takes the lock while the directory cannot be moved.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := make(chan error, 1)
	var h lock.Handle
	go func() {
		var err error
		h, err = p.Acquire(ctx, winRequest(path))
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("Acquire while the stale lock's directory is open elsewhere returned early: %v", err)
	case <-time.After(time.Second):
	}
	os.WriteFile(path+".go", nil, 0o644)
	if err := <-got; err != nil {
		t.Fatalf("Acquire after the directory was closed: %v", err)
	}
	if err := h.Check(); err != nil {
		t.Fatalf("Check of the reclaimed lock: %v", err)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}

	// Our own lock, opened by another process at release: the release
	// succeeds (ownership was verified), and the lock is free again once
	// the directory is closed and the leftover has aged out. (A stale
	// time of seconds: a holder whose heartbeat cannot refresh the lock
	// for longer than that is told it lost it, and the other process's
	// start may take that long on a loaded machine.)
	p = New(Config{Stale: 3 * time.Second, Grace: time.Second, Heartbeat: 100 * time.Millisecond, MaxPoll: 20 * time.Millisecond})
	h, err := p.Acquire(ctx, winRequest(path))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path + ".ready")
	os.Remove(path + ".go")
	opener2 := testenv.Command(envOpenDir + "=" + path)
	if err := opener2.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(path+".go", nil, 0o644)
		opener2.Wait()
	})
	testenv.Eventually(t, time.Minute, "the other process to open our directory", func() bool {
		_, err := os.Stat(path + ".ready")
		return err == nil
	})
	if err := h.Release(); err != nil {
		t.Fatalf("Release while another process has the directory open: %v", err)
	}
	os.WriteFile(path+".go", nil, 0o644)
	opener2.Wait()
	h2, err := p.Acquire(ctx, winRequest(path))
	if err != nil {
		t.Fatalf("Acquire after a release that found the directory open: %v", err)
	}
	h2.Release()
}
