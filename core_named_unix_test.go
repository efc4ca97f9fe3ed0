//go:build unix

package hold_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hold-dev/hold"
)

// namedEnv points the named-lock directory at fresh places: XDG_RUNTIME_DIR
// as given (may be empty) and TMPDIR at a new temporary directory, which
// it returns.
func namedEnv(t *testing.T, xdg string) string {
	tmp := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", xdg)
	t.Setenv("TMPDIR", tmp)
	return tmp
}

func TestNamedUsesXDGRuntimeDir(t *testing.T) {
	xdg := t.TempDir()
	namedEnv(t, xdg)
	l, err := hold.Acquire(context.Background(), "", hold.Named("deploy"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if want := filepath.Join(xdg, "hold", "deploy.lock"); l.Path() != want {
		t.Fatalf("lock path %q, want %q", l.Path(), want)
	}
	fi, err := os.Lstat(filepath.Join(xdg, "hold"))
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("lock directory: %v %v, want a directory of mode 0700", fi.Mode(), err)
	}
	if _, err := hold.TryAcquire("", hold.Named("deploy")); !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("a second holder of the same name: %v, want ErrBusy", err)
	}
	l2, err := hold.TryAcquire("", hold.Named("nightly-db"))
	if err != nil {
		t.Fatalf("another name: %v", err)
	}
	l2.Release()

	// A relative XDG_RUNTIME_DIR is not to be trusted: the fallback is used.
	tmp := namedEnv(t, "relative/dir")
	dir, err := hold.NamedDir()
	if err != nil || dir != filepath.Join(tmp, fmt.Sprintf("hold-%d", os.Getuid())) {
		t.Fatalf("NamedDir with a relative XDG_RUNTIME_DIR = %q, %v", dir, err)
	}
}

func TestNamedFallbackDirIsPrivate(t *testing.T) {
	tmp := namedEnv(t, "")
	l, err := hold.Acquire(context.Background(), "ignored", hold.Named("deploy"))
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	dir := filepath.Join(tmp, fmt.Sprintf("hold-%d", os.Getuid()))
	if l.Path() != filepath.Join(dir, "deploy.lock") {
		t.Fatalf("lock path %q, want it in %s", l.Path(), dir)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || fi.Mode().Perm() != 0o700 || int(st.Uid) != os.Getuid() {
		t.Fatalf("fallback directory: mode %v uid %d, want a directory of mode 0700 owned by %d", fi.Mode(), st.Uid, os.Getuid())
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
		tmp := namedEnv(t, "")
		elsewhere := filepath.Join(tmp, "elsewhere")
		if err := os.Mkdir(elsewhere, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(elsewhere, filepath.Join(tmp, fmt.Sprintf("hold-%d", os.Getuid()))); err != nil {
			t.Fatal(err)
		}
		refused(t, elsewhere, "fallback directory is a symlink")
	})
	t.Run("other-writable", func(t *testing.T) {
		tmp := namedEnv(t, "")
		dir := filepath.Join(tmp, fmt.Sprintf("hold-%d", os.Getuid()))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		refused(t, dir, "fallback directory writable by others")
	})
	t.Run("other-owner", func(t *testing.T) {
		tmp := namedEnv(t, "")
		dir := filepath.Join(tmp, fmt.Sprintf("hold-%d", os.Getuid()))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, otherUser, otherUser); err != nil {
			t.Skipf("cannot give a directory to another user here (%v): only root can", err)
		}
		refused(t, dir, "fallback directory owned by another user")
	})
	t.Run("xdg-other-writable", func(t *testing.T) {
		xdg := t.TempDir()
		namedEnv(t, xdg)
		dir := filepath.Join(xdg, "hold")
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		os.Chmod(dir, 0o777)
		refused(t, dir, "runtime directory writable by others")
	})
}

func relIf(l *hold.Lock) {
	if l != nil {
		l.Release()
	}
}

func TestNamedInvalidNames(t *testing.T) {
	xdg := t.TempDir()
	tmp := namedEnv(t, xdg)
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
	// Nothing may have touched the disk: neither directory was created.
	for _, d := range []string{xdg, tmp} {
		if names := dirNames(t, d); len(names) != 0 {
			t.Fatalf("an invalid name created %v in %s", names, d)
		}
	}
	for _, name := range []string{"deploy", "nightly-db", "a", "0", "v1.2_x-y", strings.Repeat("z", 64)} {
		if !hold.ValidName(name) {
			t.Errorf("ValidName(%q) = false", name)
		}
	}
}
