package hold_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/portable"
)

// Break: a directory at the lock path is a portable lock, whatever
// protocol the options chose. The portable protocol's own tests are in
// package portable and internal/dirlock.

func TestBreak(t *testing.T) {
	target := filepath.Join(t.TempDir(), "data.md")

	// A kernel lock cannot be broken.
	l, err := hold.Acquire(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hold.Break(target, false); !errors.Is(err, hold.ErrUnsupported) {
		t.Fatalf("Break of a kernel lock: %v", err)
	}
	l.Release()
	os.Remove(target + ".lock")

	// A live portable holder is refused, named; --force removes it and
	// its holder finds the lock lost.
	dir := portable.New()
	l, err = hold.Acquire(context.Background(), target, hold.WithProtocol(dir))
	if err != nil {
		t.Fatal(err)
	}
	_, err = hold.Break(target, false)
	if !errors.Is(err, hold.ErrBusy) || !strings.Contains(err.Error(), "alive") {
		t.Fatalf("Break of a live lock: %v", err)
	}
	st, err := hold.Break(target, true)
	if err != nil || st.State != hold.HeldExclusive || st.Holder.Owner.PID != os.Getpid() {
		t.Fatalf("forced Break: %+v %v", st, err)
	}
	if err := l.Check(); !errors.Is(err, hold.ErrLost) {
		t.Fatalf("holder after a forced break: %v", err)
	}
	l.Release()

	// A dead holder's lock is broken without force.
	dead := testenv.DeadPID(t)
	os.Mkdir(target+".lock", 0o777)
	os.WriteFile(filepath.Join(target+".lock", "owner.json"),
		[]byte(`{"pid":`+strconv.Itoa(dead)+`,"token":"t","started_at":"2026-01-01T00:00:00Z"}`), 0o644)
	st, err = hold.Break(target, false)
	if err != nil || st.State != hold.Stale {
		t.Fatalf("Break of a dead holder's lock: %+v %v", st, err)
	}
	if _, err := os.Lstat(target + ".lock"); !os.IsNotExist(err) {
		t.Fatalf("lock still there: %v", err)
	}
}

// breakRecorder is the kernel lock with a Break of its own, which records
// the lock path it was asked to break.
type breakRecorder struct {
	flock.Protocol
	broke *string
}

func (p breakRecorder) Break(path string, force bool) (*hold.Status, error) {
	*p.broke = path
	return &hold.Status{Path: path, Protocol: p.Name()}, nil
}

// TestBreakFair checks that Break, which accepts Fair so that one list of
// options names one lock, breaks through the protocol Fair queues for:
// the queue itself breaks nothing.
func TestBreakFair(t *testing.T) {
	target := filepath.Join(t.TempDir(), "data")
	var broke string
	if _, err := hold.Break(target, false, hold.WithProtocol(breakRecorder{broke: &broke}), hold.Fair()); err != nil {
		t.Fatal(err)
	}
	if broke != target+".lock" {
		t.Errorf("the protocol's Break was asked for %q, want %q", broke, target+".lock")
	}
}
