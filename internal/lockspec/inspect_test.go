package lockspec_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/portable"
)

// InspectAny reports a directory at the lock path as a portable lock even
// when the kernel protocol was asked for (as `hold status` does).
func TestInspectAnyFindsDirectoryLock(t *testing.T) {
	target := filepath.Join(t.TempDir(), "data.md")
	l, err := hold.Acquire(context.Background(), target, hold.WithProtocol(portable.New()))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err := hold.Inspect(target); !errors.Is(err, hold.ErrNotRegular) {
		t.Fatalf("kernel Inspect of a directory: %v", err)
	}
	st, err := lockspec.InspectAny(target)
	if err != nil || st.Protocol != "dir" || st.State != hold.HeldExclusive || st.Holder.Owner.ID != l.Owner().ID {
		t.Fatalf("InspectAny: %+v %v", st, err)
	}
	free, err := lockspec.InspectAny(filepath.Join(t.TempDir(), "none"))
	if err != nil || free.State != hold.Free {
		t.Fatalf("InspectAny of nothing: %+v %v", free, err)
	}
}

// A request's stale time (an agent status request's "stale", which the
// proper-lockfile drop-in's check() sends) judges an ownerless portable
// lock by it, also when the kernel protocol was asked for and the
// directory is found instead: what an acquisition with that stale time
// would conclude.
func TestResolvedInspectJudgesByItsStaleTime(t *testing.T) {
	t.Setenv(lockspec.ProtocolEnv, "")
	target := filepath.Join(t.TempDir(), "data.md")
	if err := os.Mkdir(target+".lock", 0o777); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-30 * time.Second)
	if err := os.Chtimes(target+".lock", old, old); err != nil {
		t.Fatal(err)
	}
	// (The portable protocol asked for itself: portable's
	// TestInspectStaleAfterJudgesAsAcquireWould.)
	for _, c := range []struct {
		stale time.Duration
		want  hold.State
	}{
		{0, hold.Stale}, // the protocol's 10 s
		{time.Hour, hold.HeldExclusive},
		{5 * time.Second, hold.Stale},
	} {
		s := lockspec.Spec{Target: target, Stale: c.stale}
		r, err := s.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		st, err := r.Inspect()
		r.Close()
		if err != nil || st.State != c.want {
			t.Errorf("stale %v: %v, %v; want %v", c.stale, st, err, c.want)
		}
	}
}
