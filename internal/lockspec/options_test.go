package lockspec

import (
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/hold-dev/hold"
)

// TestResolvedOptionsApply checks that a request with every option a
// front end can give resolves to options that each entry point it is
// used with accepts (hold refuses an option where it does not apply):
// all of them for TryAcquire, and those that name the lock for Inspect,
// which `hold status` and the agent's status call with any request.
func TestResolvedOptionsApply(t *testing.T) {
	t.Setenv(ProtocolEnv, "")
	target := filepath.Join(t.TempDir(), "data")
	s := Spec{Target: target, Shared: true, Fair: runtime.GOOS != "windows", FailIfHeldHere: true, Stale: time.Minute, MakeDirs: true, Mode: 0o600,
		Fields: []Field{{Key: "job", Value: "test"}}}
	r, err := s.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l, err := hold.TryAcquire(r.Target, r.Opts...)
	if err != nil {
		t.Fatalf("TryAcquire with the resolved options: %v", err)
	}
	defer l.Release()
	if o := l.Owner(); !o.Shared || o.Fields["job"] != "test" {
		t.Errorf("the lock taken is not the one asked for: shared %v, fields %v", o.Shared, o.Fields)
	}
	st, err := r.Inspect()
	if err != nil {
		t.Fatalf("Inspect with the resolved options: %v", err)
	}
	if st.State != hold.HeldShared || st.Path != l.Path() {
		t.Errorf("Inspect found %v at %s, want held shared at %s", st.State, st.Path, l.Path())
	}
}
