//go:build unix

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatusSharedHolderIsNotCalledForeign: hold's own shared holders
// write no owner record, and status must not say they are not hold.
func TestStatusSharedHolderIsNotCalledForeign(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reader, _ := holdCommand(t, dir, "-s")
	for _, args := range [][]string{{"status", "T"}, {"status", "--json", "T"}} {
		r := runHold(t, dir, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "held shared") {
			t.Fatalf("hold %v: exit %d: %s%s", args, r.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout, "not hold") || !strings.Contains(r.stdout, "shared holders write no owner record") {
			t.Errorf("hold %v on hold's own shared holder:\n%s", args, r.stdout)
		}
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, reader)
}

// TestStatusReleasedNamesNoHolder: a released kernel lock keeps only its
// last token; status must not present that as a holder with pid 0.
func TestStatusReleasedNamesNoHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, _ := holdCommand(t, dir)
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if code := waitExit(t, holder); code != 0 {
		t.Fatalf("holder exit %d", code)
	}
	r := runHold(t, dir, "status", "T")
	if !strings.Contains(r.stdout, "T.lock: free") || !strings.Contains(r.stdout, "last token: 1\n") {
		t.Fatalf("status after release:\n%s%s", r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, "pid 0") || strings.Contains(r.stdout, "holder") {
		t.Errorf("status of a released lock names a holder:\n%s", r.stdout)
	}
	r = runHold(t, dir, "status", "--json", "T")
	if !strings.Contains(r.stdout, `"token":1`) || strings.Contains(r.stdout, `"holder"`) {
		t.Errorf("status --json of a released lock: %s", r.stdout)
	}
}
