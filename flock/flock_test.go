package flock_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/flock"
)

func lockPath(t *testing.T) string {
	return filepath.Join(t.TempDir(), "app.lock")
}

// TestOtherProcessExcludes: a lock held by another process (this binary,
// re-executed) makes tries fail without error in both modes, names that
// process in Status, and Lock waits until it lets go.
func TestOtherProcessExcludes(t *testing.T) {
	path := lockPath(t)
	h := startWorker(t, "lock", path)

	f := flock.New(path)
	if ok, err := f.TryLock(); ok || err != nil {
		t.Fatalf("TryLock of a lock another process holds = %v, %v; want false, nil", ok, err)
	}
	if ok, err := f.TryRLock(); ok || err != nil {
		t.Fatalf("TryRLock of a lock another process holds = %v, %v; want false, nil", ok, err)
	}
	if f.Locked() || f.RLocked() {
		t.Fatal("a failed try left the Flock marked locked")
	}
	st, err := f.Status()
	if err != nil {
		t.Fatal(err)
	}
	if st.State != hold.HeldExclusive || st.Holder == nil || st.Holder.Owner == nil || st.Holder.Owner.PID != h.cmd.Process.Pid {
		t.Fatalf("Status = %+v, want held exclusive by pid %d", st, h.cmd.Process.Pid)
	}

	done := make(chan error, 1)
	go func() { done <- f.Lock() }()
	h.release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Lock still waits 30s after the other process let go")
	}
	if !f.Locked() {
		t.Fatal("Locked() = false after Lock")
	}
	if err := f.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// TestSharedBesideShared: shared holders in two processes hold together,
// and keep an exclusive try out.
func TestSharedBesideShared(t *testing.T) {
	path := lockPath(t)
	startWorker(t, "rlock", path)

	f := flock.New(path)
	if ok, err := f.TryRLock(); !ok || err != nil {
		t.Fatalf("TryRLock beside another process's RLock = %v, %v; want true, nil", ok, err)
	}
	if err := f.RLock(); err != nil || !f.RLocked() || f.Locked() {
		t.Fatalf("RLock of a Flock that holds it shared: %v, RLocked %v, Locked %v", err, f.RLocked(), f.Locked())
	}
	g := flock.New(path)
	if ok, err := g.TryLock(); ok || err != nil {
		t.Fatalf("TryLock while two processes hold it shared = %v, %v; want false, nil", ok, err)
	}
	if err := f.Unlock(); err != nil {
		t.Fatal(err)
	}
	if ok, err := g.TryLock(); ok || err != nil {
		t.Fatalf("TryLock while the other process still holds it shared = %v, %v; want false, nil", ok, err)
	}
}

// TestTryLockContext: the retries end with ctx's error when the lock
// stays held, and succeed once it is let go.
func TestTryLockContext(t *testing.T) {
	path := lockPath(t)
	holderF := flock.New(path)
	if err := holderF.Lock(); err != nil {
		t.Fatal(err)
	}
	f := flock.New(path)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, err := f.TryLockContext(ctx, time.Millisecond); ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("TryLockContext with an ended context = %v, %v; want false, context.Canceled", ok, err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if ok, err := f.TryLockContext(ctx, 5*time.Millisecond); ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryLockContext on a held lock = %v, %v; want false, DeadlineExceeded", ok, err)
	}
	if ok, err := f.TryRLockContext(ctx, 5*time.Millisecond); ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryRLockContext on a held lock = %v, %v; want false, DeadlineExceeded", ok, err)
	}

	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ok, err := f.TryLockContext(ctx, 5*time.Millisecond)
		if err == nil && !ok {
			err = errors.New("not locked")
		}
		got <- err
	}()
	if err := holderF.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("TryLockContext after the holder let go: %v", err)
	}
	if !f.Locked() {
		t.Fatal("Locked() = false after TryLockContext succeeded")
	}
	f.Unlock()
}

// TestUnlockAndClose: Unlock of a Flock that holds nothing is nil, Close
// lets the lock go (for another process too) and may be called again,
// and the file stays.
func TestUnlockAndClose(t *testing.T) {
	path := lockPath(t)
	f := flock.New(path)
	if err := f.Unlock(); err != nil {
		t.Fatalf("Unlock of an unlocked Flock: %v", err)
	}
	if ok, err := f.TryLock(); !ok || err != nil {
		t.Fatalf("TryLock of a free lock = %v, %v", ok, err)
	}
	if f.Held() == nil {
		t.Fatal("Held() = nil while locked")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if f.Locked() || f.RLocked() || f.Held() != nil {
		t.Fatal("the Flock still says it is locked after Close")
	}
	if err := f.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the lock file is gone after Close: %v", err)
	}
	// Another process takes it, so it was given up, not only marked so.
	h := startWorker(t, "lock", path)
	h.release()
	if err := h.cmd.ProcessState.ExitCode(); err != 0 {
		t.Fatalf("the other process exited %d", err)
	}
}

// TestTwoFlocksOneProcess: two Flocks on one path exclude each other in
// one process, as two gofrs/flock values do.
func TestTwoFlocksOneProcess(t *testing.T) {
	path := lockPath(t)
	a, b := flock.New(path), flock.New(path)
	if ok, err := a.TryRLock(); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if ok, err := b.TryLock(); ok || err != nil {
		t.Fatalf("TryLock beside a shared Flock = %v, %v; want false, nil", ok, err)
	}
	if ok, err := b.TryRLock(); !ok || err != nil {
		t.Fatalf("TryRLock beside a shared Flock = %v, %v; want true, nil", ok, err)
	}
	b.Unlock()
	// a converts to exclusive: b's try is then refused in both modes.
	if err := a.Lock(); err != nil || !a.Locked() {
		t.Fatalf("Lock of a shared Flock: %v, Locked %v", err, a.Locked())
	}
	if ok, err := b.TryRLock(); ok || err != nil {
		t.Fatalf("TryRLock beside an exclusive Flock = %v, %v; want false, nil", ok, err)
	}
	a.Unlock()
	if ok, err := b.TryLock(); !ok || err != nil {
		t.Fatalf("TryLock after Unlock = %v, %v; want true, nil", ok, err)
	}
	b.Unlock()
}

// TestWithoutCreate: without O_CREATE a missing file is an error that
// says so, and is not made.
func TestWithoutCreate(t *testing.T) {
	path := lockPath(t)
	f := flock.New(path, flock.SetFlag(os.O_RDONLY))
	if ok, err := f.TryLock(); ok || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("TryLock of a missing file without O_CREATE = %v, %v; want false, ErrNotExist", ok, err)
	}
	if err := f.Lock(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Lock of a missing file without O_CREATE: %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the file was made: %v", err)
	}
	if _, err := f.Stat(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat of the missing file: %v", err)
	}
}

// TestPathAndString: both are the path given to New, whatever it is.
func TestPathAndString(t *testing.T) {
	f := flock.NewFlock("some/rel.lock")
	if f.Path() != "some/rel.lock" || f.String() != "some/rel.lock" {
		t.Fatalf("Path %q, String %q", f.Path(), f.String())
	}
}
