package lockspec_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

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
