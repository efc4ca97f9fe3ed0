//go:build unix

package lockspec

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold"
)

// TestLockedApart: the query behind hold run's note that flock(1) users
// of F take another lock than hold's F.lock. It names F's own holder only
// when that lock is not one the request takes.
func TestLockedApart(t *testing.T) {
	dir := t.TempDir()
	f, dot := filepath.Join(dir, "local-lock-file"), filepath.Join(dir, "x.lock")
	for _, p := range []string{f, dot} {
		if err := os.WriteFile(p, []byte("data\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	apart := func(s Spec) (*hold.Status, error) {
		t.Helper()
		r, err := s.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		return r.lockedApart()
	}
	if st, err := apart(Spec{Target: f}); st != nil || err != nil {
		t.Errorf("lockedApart of a free file: %+v, %v; want nil", st, err)
	}
	for _, p := range []string{f, dot} {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			t.Fatal(err)
		}
	}
	st, err := apart(Spec{Target: f})
	if err != nil || st == nil || st.State != hold.HeldExclusive || st.Path != f {
		t.Errorf("lockedApart(%s) while it is flocked: %+v, %v; want %s held exclusive", f, st, err, f)
	}
	for what, s := range map[string]Spec{
		"a target named *.lock (locked itself)": {Target: dot},
		"--lock-file":                           {Target: f, LockFile: f},
		"--name":                                {Name: "apart"},
		"a missing file":                        {Target: filepath.Join(dir, "missing")},
	} {
		if st, err := apart(s); st != nil || err != nil {
			t.Errorf("lockedApart with %s: %+v, %v; want nil", what, st, err)
		}
	}
}
