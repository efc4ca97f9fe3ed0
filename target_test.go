package hold_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hold-dev/hold"
)

// chdir changes the working directory for the rest of the test.
func chdir(t *testing.T, dir string) {
	t.Helper()
	old, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chdir(old) })
}

// TestTargetSpellingsShareOneLock: every spelling of one directory ("data",
// "data/", "data//", "./data/", "data/." and, from inside it, "." and
// "sub/..") takes one lock, data.lock beside it, and excludes the others;
// "." and ".." never make the hidden files "..lock" and "...lock".
func TestTargetSpellingsShareOneLock(t *testing.T) {
	root := t.TempDir()
	// TempDir may sit behind a symlink (macOS /var); Getwd then names the
	// resolved path, and so does the lock of ".".
	root, err := filepath.EvalSymlinks(root)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(root, "data")
	if err := os.MkdirAll(filepath.Join(data, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	chdir(t, root)
	want := filepath.Join(root, "data.lock")
	sep := string(filepath.Separator)

	l, err := hold.TryAcquire("data")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, target string }{
		{root, "data" + sep},
		{root, "data" + sep + sep},
		{root, "." + sep + "data" + sep},
		{root, "data" + sep + "."},
		{root, data + sep},
		{data, "."},
		{data, "." + sep},
		{data, "sub" + sep + ".."},
		{filepath.Join(data, "sub"), ".."},
		{filepath.Join(data, "sub"), ".." + sep},
	} {
		chdir(t, c.dir)
		st, err := hold.Inspect(c.target)
		if err != nil {
			t.Fatalf("Inspect(%q) in %s: %v", c.target, c.dir, err)
		}
		if got, _ := filepath.Abs(st.Path); got != want {
			t.Errorf("target %q in %s: lock path %q (%s), want %s", c.target, c.dir, st.Path, got, want)
		}
		if st.State != hold.HeldExclusive {
			t.Errorf("target %q in %s: state %v, want held by the lock on \"data\"", c.target, c.dir, st.State)
		}
		if l2, err := hold.TryAcquire(c.target); !errors.Is(err, hold.ErrBusy) {
			if l2 != nil {
				l2.Release()
			}
			t.Errorf("TryAcquire(%q) in %s: %v, want ErrBusy: the lock on \"data\" excludes it", c.target, c.dir, err)
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{root, data, filepath.Join(data, "sub")} {
		for _, hidden := range []string{"..lock", "...lock", ".lock"} {
			if _, err := os.Lstat(filepath.Join(d, hidden)); err == nil {
				t.Errorf("%s was created", filepath.Join(d, hidden))
			}
		}
	}

	// A plain file keeps its lock path, and a relative target stays
	// relative.
	chdir(t, root)
	l, err = hold.TryAcquire("f.txt")
	if err != nil {
		t.Fatal(err)
	}
	if l.Path() != "f.txt.lock" {
		t.Errorf("Path() = %q, want f.txt.lock", l.Path())
	}
	l.Release()
}

// TestRootTargetRefused: the root directory has nowhere beside it for a
// lock; the error says so and names the way out, and nothing is created.
func TestRootTargetRefused(t *testing.T) {
	roots := []string{"/", "//"}
	if runtime.GOOS == "windows" {
		roots = []string{`C:\`, `C:/`}
	} else {
		chdir(t, "/")
		roots = append(roots, ".", "..", "./")
	}
	for _, r := range roots {
		// Inspect first: it never creates anything, so a failure here
		// leaves no lock file in the root directory.
		if _, err := hold.Inspect(r); !errors.Is(err, hold.ErrInvalidName) {
			t.Errorf("Inspect(%q): %v, want ErrInvalidName", r, err)
			continue
		}
		_, err := hold.TryAcquire(r)
		var he *hold.Error
		if !errors.Is(err, hold.ErrInvalidName) || !errors.As(err, &he) || he.Hint == "" {
			t.Errorf("TryAcquire(%q): %v, want ErrInvalidName with a hint", r, err)
		}
	}
}

// TestNamedDotLock: a name ending in ".lock" is its own lock file in the
// named-lock directory, as a target is: "db" and "db.lock" are one lock.
func TestNamedDotLock(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	a, err := hold.Inspect("", hold.Named("db"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := hold.Inspect("", hold.Named("db.lock"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Path != b.Path || filepath.Base(a.Path) != "db.lock" {
		t.Errorf("Named(db) locks %s, Named(db.lock) %s; want one db.lock", a.Path, b.Path)
	}
}

// TestDefaultProtocol checks that DefaultProtocol is the protocol Acquire
// takes a lock with when none is named.
func TestDefaultProtocol(t *testing.T) {
	target := filepath.Join(t.TempDir(), "t")
	l, err := hold.Acquire(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if got, want := l.Protocol(), hold.DefaultProtocol().Name(); got != want || want != "flock" {
		t.Errorf("Acquire took a %q lock; DefaultProtocol is %q", got, want)
	}
}
