//go:build unix

package flock_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/hold-dev/hold/flock"
	"github.com/hold-dev/hold/internal/testenv"
)

const needFlock1 = "flock(1) is in util-linux (Debian: apt-get install util-linux)"

// TestFlock1Excludes: flock(1) on the same file and a Flock exclude each
// other both ways, so a program switched to hold shares its lock with
// scripts that still use flock(1).
func TestFlock1Excludes(t *testing.T) {
	tool := testenv.LookPath(t, "flock", needFlock1)
	path := lockPath(t)

	f := flock.New(path)
	if err := f.Lock(); err != nil {
		t.Fatal(err)
	}
	err := exec.Command(tool, "-n", path, "true").Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("flock -n on a file a Flock holds: %v, want exit status 1", err)
	}
	if err := f.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(tool, "-n", path, "true").Run(); err != nil {
		t.Fatalf("flock -n after Unlock: %v", err)
	}

	h := startHolder(t, exec.Command(tool, path, "sh", "-c", "echo held; cat >/dev/null"))
	if ok, err := f.TryLock(); ok || err != nil {
		t.Fatalf("TryLock while flock(1) holds the file = %v, %v; want false, nil", ok, err)
	}
	h.release()
	if ok, err := f.TryLock(); !ok || err != nil {
		t.Fatalf("TryLock after flock(1) let go = %v, %v; want true, nil", ok, err)
	}
	f.Unlock()
}

// TestPermissions: a file locking creates gets SetPermissions' bits (0600
// by default, as under gofrs/flock), under the umask.
func TestPermissions(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	for _, c := range []struct {
		opts []flock.Option
		want os.FileMode
	}{{nil, 0o600}, {[]flock.Option{flock.SetPermissions(0o644)}, 0o644}} {
		path := filepath.Join(t.TempDir(), "perm.lock")
		f := flock.New(path, c.opts...)
		if err := f.Lock(); err != nil {
			t.Fatal(err)
		}
		f.Unlock()
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != c.want {
			t.Errorf("lock file mode %v, want %v", st.Mode().Perm(), c.want)
		}
	}
}

// TestBusyTryKeepsNothingOpen: a try that finds the lock busy leaves no
// descriptor open, as gofrs/flock closes its handle (its internal test
// reads that field; this counts the process's descriptors).
func TestBusyTryKeepsNothingOpen(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors in /proc/self/fd")
	}
	path := lockPath(t)
	a := flock.New(path)
	if err := a.Lock(); err != nil {
		t.Fatal(err)
	}
	defer a.Unlock()
	count := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	b := flock.New(path)
	b.TryLock() // a first call may open what stays for the process (timers, pollers)
	before := count()
	for range 10 {
		if ok, err := b.TryLock(); ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	if after := count(); after > before {
		t.Fatalf("%d descriptors open after 10 busy tries, %d before", after, before)
	}
}

// TestDirectory: a directory is locked as it is (gofrs/flock locks one
// opened read-only), and two Flocks on it exclude each other.
func TestDirectory(t *testing.T) {
	dir := t.TempDir()
	a := flock.New(dir, flock.SetFlag(os.O_RDONLY))
	b := flock.New(dir, flock.SetFlag(os.O_RDONLY))
	if ok, err := a.TryLock(); !ok || err != nil {
		t.Fatalf("TryLock of a directory = %v, %v", ok, err)
	}
	if ok, err := b.TryLock(); ok || err != nil {
		t.Fatalf("second TryLock of a locked directory = %v, %v; want false, nil", ok, err)
	}
	if err := a.Unlock(); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.TryRLock(); !ok || err != nil {
		t.Fatalf("TryRLock after Unlock = %v, %v", ok, err)
	}
	b.Unlock()
}
