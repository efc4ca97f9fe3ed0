package hold_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/testenv"
)

// TestNamedLockSurvivesTmpfilesClean: systemd-tmpfiles, which ages
// /var/tmp (where named locks live when /run/lock is not everyone's),
// leaves a held named lock's file alone however old it looks, and removes
// it once released (so the first half is not luck).
func TestNamedLockSurvivesTmpfilesClean(t *testing.T) {
	tmpfiles := testenv.LookPath(t, "systemd-tmpfiles", "systemd-tmpfiles is not installed (Debian package systemd)")
	dir := namedEnv(t)
	parent := filepath.Dir(dir)
	conf := filepath.Join(t.TempDir(), "age.conf")
	// Age by access and modification time: a file's change time cannot
	// be set into the past.
	if err := os.WriteFile(conf, []byte("d "+parent+" - - - am:1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	clean := func() {
		t.Helper()
		old := time.Now().Add(-365 * 24 * time.Hour)
		os.Chtimes(filepath.Join(dir, "deploy.lock"), old, old)
		os.Chtimes(dir, old, old)
		if out, err := exec.Command(tmpfiles, "--clean", conf).CombinedOutput(); err != nil {
			t.Fatalf("systemd-tmpfiles --clean: %v\n%s", err, out)
		}
	}
	l, err := hold.Acquire(context.Background(), "", hold.Named("deploy"))
	if err != nil {
		t.Fatal(err)
	}
	clean()
	if err := l.Check(); err != nil {
		t.Fatalf("systemd-tmpfiles removed a held named lock: %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	clean()
	if _, err := os.Stat(filepath.Join(dir, "deploy.lock")); !os.IsNotExist(err) {
		t.Fatalf("released and aged, the lock file was not cleaned (%v): the test shows nothing", err)
	}
}
