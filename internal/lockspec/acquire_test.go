package lockspec

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/nameddir"
)

// TestResolveLockPath checks that the lock path options of a request
// reach the library: the target's own lock file, a lock file given
// instead, a named lock.
func TestResolveLockPath(t *testing.T) {
	t.Setenv(ProtocolEnv, "")
	t.Setenv(nameddir.TestEnv, t.TempDir())
	dir := t.TempDir()
	target := filepath.Join(dir, "data")
	for _, c := range []struct {
		spec  Spec
		label string
		path  func(string) bool
	}{
		{Spec{Target: target}, target, func(p string) bool { return p == target+".lock" }},
		{Spec{Target: target, LockFile: filepath.Join(dir, "other")}, target, func(p string) bool { return p == filepath.Join(dir, "other") }},
		{Spec{Name: "deploy"}, "deploy", func(p string) bool { return strings.Contains(p, "deploy") }},
	} {
		r, err := c.spec.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		if r.Label != c.label {
			t.Errorf("%+v: label %q, want %q", c.spec, r.Label, c.label)
		}
		st, err := r.Inspect()
		if err != nil {
			t.Fatal(err)
		}
		if !c.path(st.Path) || st.State != hold.Free {
			t.Errorf("%+v: lock %s is %v", c.spec, st.Path, st.State)
		}
	}
}

// TestAcquireNonblockBusy checks that -n fails at once on a held lock,
// with the library's ErrBusy, and takes a free one.
func TestAcquireNonblockBusy(t *testing.T) {
	t.Setenv(ProtocolEnv, "")
	target := filepath.Join(t.TempDir(), "data")
	r, err := (&Spec{Target: target, Nonblock: true}).Resolve()
	if err != nil {
		t.Fatal(err)
	}
	l, err := r.Acquire(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	// A second open of the lock file: a kernel lock belongs to the open
	// file, so this is what another process would find.
	if l2, err := r.Acquire(context.Background(), nil); !errors.Is(err, hold.ErrBusy) {
		if l2 != nil {
			l2.Release()
		}
		t.Fatalf("second -n acquisition: %v, want ErrBusy", err)
	}
	if msg := r.waitingMessage(1500 * time.Millisecond); !strings.Contains(msg, "waiting (1.5s so far) for "+l.Path()) || !strings.Contains(msg, "held") {
		t.Errorf("waiting message %q does not say who holds it", msg)
	}
	// Under -w the bound is said as one, apart from the time so far
	// (issue 59: "waiting 1s" under -w 10 read like a limit).
	bounded := *r
	bounded.Timeout = 10 * time.Second
	if msg := bounded.waitingMessage(time.Second); !strings.Contains(msg, "waiting (1s so far, up to 10s) for "+l.Path()) {
		t.Errorf("waiting message under -w 10: %q", msg)
	}
	if l.Release() != nil {
		t.Fatal("release failed")
	}
	if msg := r.waitingMessage(time.Second); !strings.HasSuffix(msg, ", just released") {
		t.Errorf("waiting message for a free lock: %q", msg)
	}
}

// TestAcquireWaitTimesOut checks that -w bounds the wait for a held lock.
func TestAcquireWaitTimesOut(t *testing.T) {
	t.Setenv(ProtocolEnv, "")
	target := filepath.Join(t.TempDir(), "data")
	held, err := hold.TryAcquire(target)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	r, err := (&Spec{Target: target, WaitGiven: true, Wait: 50 * time.Millisecond}).Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if l, err := r.Acquire(context.Background(), nil); !errors.Is(err, hold.ErrTimeout) {
		if l != nil {
			l.Release()
		}
		t.Fatalf("got %v, want ErrTimeout", err)
	}
}
