//go:build unix

package hold_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/nameddir"
)

// namedEnv points the named-lock directory at a fresh place (the tests'
// override, HOLD_TEST_NAMED_DIR) and XDG_RUNTIME_DIR and TMPDIR, which
// name where earlier versions kept named locks, at fresh directories too.
// It returns the named-lock directory, which does not exist yet.
func namedEnv(t *testing.T) string {
	base := t.TempDir()
	t.Setenv("HOLD_TEST_NAMED_DIR", filepath.Join(base, "named"))
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(base, "xdg"))
	t.Setenv("TMPDIR", filepath.Join(base, "tmp"))
	return filepath.Join(base, "named")
}

// TestNamedDirIgnoresEnvironment: the named-lock directory is the same
// whatever XDG_RUNTIME_DIR and TMPDIR say, and is hold-UID in /run/lock
// (where that is a sticky directory everyone may write) or /var/tmp.
func TestNamedDirIgnoresEnvironment(t *testing.T) {
	t.Setenv("HOLD_TEST_NAMED_DIR", "")
	parent := "/var/tmp"
	if fi, err := os.Stat("/run/lock"); runtime.GOOS == "linux" && err == nil && fi.Mode()&os.ModeSticky != 0 && fi.Mode().Perm()&0o002 != 0 {
		parent = "/run/lock"
	}
	want := filepath.Join(parent, fmt.Sprintf("hold-%d", os.Getuid()))
	for _, env := range [][2]string{{"", ""}, {t.TempDir(), ""}, {"", t.TempDir()}, {t.TempDir(), t.TempDir()}, {"relative", "relative"}} {
		t.Setenv("XDG_RUNTIME_DIR", env[0])
		t.Setenv("TMPDIR", env[1])
		if dir, err := nameddir.Dir(); err != nil || dir != want {
			t.Errorf("XDG_RUNTIME_DIR=%q TMPDIR=%q: nameddir.Dir = %q, %v, want %q", env[0], env[1], dir, err, want)
		}
	}
}

func TestNamedDirIsPrivate(t *testing.T) {
	dir := namedEnv(t)
	l, err := hold.Acquire(context.Background(), "ignored", hold.Named("deploy"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Path() != filepath.Join(dir, "deploy.lock") {
		t.Fatalf("lock path %q, want it in %s", l.Path(), dir)
	}
	if _, err := hold.TryAcquire("", hold.Named("deploy")); !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("a second holder of the same name: %v, want ErrBusy", err)
	}
	l2, err := hold.TryAcquire("", hold.Named("nightly-db"))
	if err != nil {
		t.Fatalf("another name: %v", err)
	}
	l2.Release()
	l.Release()
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 || int(st.Uid) != os.Getuid() {
		t.Fatalf("named-lock directory: mode %v uid %d, want a directory of mode 0700 owned by %d", fi.Mode(), st.Uid, os.Getuid())
	}
}

func TestNamedRefusesUnsafeDir(t *testing.T) {
	refused := func(t *testing.T, dir, why string) {
		t.Helper()
		for _, try := range []func() error{
			func() error { l, err := hold.TryAcquire("", hold.Named("deploy")); relIf(l); return err },
			func() error { _, err := hold.Inspect("", hold.Named("deploy")); return err },
		} {
			err := try()
			var he *hold.Error
			if !errors.As(err, &he) {
				t.Fatalf("%s: %T %v, want a *hold.Error", why, err, err)
			}
			t.Logf("%s: %v", why, err)
		}
		if fileExists(filepath.Join(dir, "deploy.lock")) {
			t.Fatalf("%s: a lock file was created in it", why)
		}
	}
	t.Run("symlink", func(t *testing.T) {
		dir := namedEnv(t)
		elsewhere := filepath.Join(filepath.Dir(dir), "elsewhere")
		if err := os.Mkdir(elsewhere, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, dir); err != nil {
			t.Fatal(err)
		}
		refused(t, elsewhere, "named-lock directory is a symlink")
	})
	t.Run("other-writable", func(t *testing.T) {
		dir := namedEnv(t)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, "named-lock directory writable by others")
	})
	t.Run("other-owner", func(t *testing.T) {
		dir := namedEnv(t)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, otherUser, otherUser); err != nil {
			t.Skipf("cannot give a directory to another user here (%v): only root can", err)
		}
		refused(t, dir, "named-lock directory owned by another user")
	})
}

func relIf(l *hold.Lock) {
	if l != nil {
		l.Release()
	}
}

func TestNamedInvalidNames(t *testing.T) {
	dir := namedEnv(t)
	bad := []string{"", "Deploy", "a/b", "../x", "..", ".", ".hidden", "-x", "_x", "a b", "ü", "a\x00b", "x.lock/", `a\b`,
		strings.Repeat("a", 65)}
	for _, name := range bad {
		if hold.ValidName(name) {
			t.Errorf("ValidName(%q) = true", name)
		}
		l, err := hold.TryAcquire("t", hold.Named(name))
		relIf(l)
		var he *hold.Error
		if !errors.Is(err, hold.ErrInvalidName) || !errors.As(err, &he) {
			t.Errorf("Named(%q): %v, want a *hold.Error matching ErrInvalidName", name, err)
		}
		if _, err := hold.Acquire(context.Background(), "t", hold.Named(name)); !errors.Is(err, hold.ErrInvalidName) {
			t.Errorf("Acquire Named(%q): %v", name, err)
		}
		if _, err := hold.Inspect("t", hold.Named(name)); !errors.Is(err, hold.ErrInvalidName) {
			t.Errorf("Inspect Named(%q): %v", name, err)
		}
	}
	// Nothing may have touched the disk: no directory was created.
	if names := dirNames(t, filepath.Dir(dir)); len(names) != 0 {
		t.Fatalf("an invalid name created %v in %s", names, filepath.Dir(dir))
	}
	for _, name := range []string{"deploy", "nightly-db", "a", "0", "v1.2_x-y", strings.Repeat("z", 64)} {
		if !hold.ValidName(name) {
			t.Errorf("ValidName(%q) = false", name)
		}
	}
}
