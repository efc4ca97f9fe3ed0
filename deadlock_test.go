package hold_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/portable"
)

// TestFailIfHeldHere: a wait for a lock this process holds fails at once
// with ErrDeadlock when the caller says nothing here can release it, and
// names the holder; without the option it is waited for (another
// goroutine may release it), here until the context's deadline.
func TestFailIfHeldHere(t *testing.T) {
	target := filepath.Join(t.TempDir(), "t")
	l, err := hold.TryAcquire(target)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, opts := range [][]hold.Option{{hold.FailIfHeldHere()}, {hold.FailIfHeldBy(l)}, {hold.FailIfHeldHere(), hold.Shared()}} {
		_, err = hold.Acquire(ctx, target, opts...)
		if !errors.Is(err, hold.ErrDeadlock) || !strings.Contains(err.Error(), "held by pid") {
			t.Fatalf("Acquire of a lock held here: %v, want ErrDeadlock naming the holder", err)
		}
	}
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	if _, err := hold.Acquire(short, target); !errors.Is(err, hold.ErrTimeout) {
		t.Fatalf("Acquire without the option: %v, want a wait that times out", err)
	}
	// Another lock, released: nothing of the caller's holds the lock.
	other, err := hold.TryAcquire(target + "2")
	if err != nil {
		t.Fatal(err)
	}
	other.Release()
	done := make(chan error, 1)
	go func() {
		l2, err := hold.Acquire(ctx, target, hold.FailIfHeldBy(other))
		if err == nil {
			l2.Release()
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	l.Release()
	if err := <-done; err != nil {
		t.Fatalf("Acquire with a released lock as held: %v, want the lock once released", err)
	}
	// Released, the lock is no longer this process's.
	l3, err := hold.Acquire(ctx, target, hold.FailIfHeldHere())
	if err != nil {
		t.Fatalf("Acquire after the release: %v", err)
	}
	l3.Release()
}

// TestFailIfHeldHereDotLock: "app" and "app.lock" exclude each other
// through the kernel lock of app.lock (the lock path of the one, the file
// the other is locked as too), so a wait for either while this process
// holds the other is a deadlock too, reported at once.
func TestFailIfHeldHereDotLock(t *testing.T) {
	dir := t.TempDir()
	app, dot := filepath.Join(dir, "app"), filepath.Join(dir, "app.lock")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, pair := range [][2]string{{app, dot}, {dot, app}, {dot, dot}} {
		l, err := hold.TryAcquire(pair[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, opts := range [][]hold.Option{{hold.FailIfHeldHere()}, {hold.FailIfHeldBy(l)}} {
			if l2, err := hold.Acquire(ctx, pair[1], opts...); !errors.Is(err, hold.ErrDeadlock) {
				if l2 != nil {
					l2.Release()
				}
				t.Errorf("Acquire(%s) while this process holds %s: %v, want ErrDeadlock", filepath.Base(pair[1]), filepath.Base(pair[0]), err)
			}
		}
		l.Release()
		l2, err := hold.Acquire(ctx, pair[1], hold.FailIfHeldHere())
		if err != nil {
			t.Fatalf("Acquire(%s) once %s is released: %v", filepath.Base(pair[1]), filepath.Base(pair[0]), err)
		}
		l2.Release()
	}
}

// TestMakeDirsAndMode: MakeDirs makes the lock file's missing directories;
// LockFileMode sets a created lock file's permission bits; a NUL byte in a
// path is an invalid name.
func TestMakeDirsAndMode(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "a", "b", "t")
	if _, err := hold.TryAcquire(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("without MakeDirs: %v, want ErrNotExist", err)
	}
	l, err := hold.TryAcquire(target, hold.MakeDirs(), hold.LockFileMode(0o600))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	fi, err := os.Stat(target + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 && os.PathSeparator == '/' {
		t.Errorf("lock file mode %v, want 0600", fi.Mode().Perm())
	}
	for _, p := range []string{"a\x00b", ""} {
		var err error
		if p == "" {
			_, err = hold.TryAcquire("x", hold.LockFile("x\x00.lock"))
		} else {
			_, err = hold.TryAcquire(p)
		}
		if !errors.Is(err, hold.ErrInvalidName) || !strings.Contains(err.Error(), "NUL") {
			t.Errorf("a NUL byte: %v, want ErrInvalidName saying so", err)
		}
	}
}

// TestFailIfHeldHereAnySpelling: the lock is compared, never its
// spelling: a wait with FailIfHeldHere or FailIfHeldBy for a lock held
// here, named through a symlinked directory, with "..", relative where it
// was taken absolute, or by another hard link of its file, is the
// deadlock error at once, for a kernel lock and a portable one.
func TestFailIfHeldHereAnySpelling(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(dir, "link")); err != nil {
		t.Skipf("no symlinks here: %v", err)
	}
	t.Chdir(dir)
	for _, proto := range []string{"flock", "dir"} {
		t.Run(proto, func(t *testing.T) {
			var opts []hold.Option
			if proto == "dir" {
				opts = append(opts, hold.WithProtocol(portable.New()))
			}
			target := filepath.Join(real, proto+".lock")
			l, err := hold.TryAcquire(target, opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release()
			spellings := []string{
				filepath.Join(real, "..", "real", proto+".lock"),
				filepath.Join("real", proto+".lock"),
			}
			// Under wine a directory symlink made by os.Symlink is not
			// followed in a path ("Path not found"), and the hard-link
			// spelling of a kernel lock was not found to be the same
			// lock there (not examined further): those spellings are
			// checked on Linux and macOS, and would be on Windows itself.
			linked := !testenv.UnderWine()
			if linked {
				spellings = append(spellings,
					filepath.Join(dir, "link", proto+".lock"),
					filepath.Join("link", "..", "real", ".", proto+".lock"))
			}
			if proto == "flock" && linked {
				if err := os.Link(target, filepath.Join(real, "hard.lock")); err != nil {
					t.Fatal(err)
				}
				spellings = append(spellings, filepath.Join(real, "hard.lock"))
			}
			for _, s := range spellings {
				for _, o := range []hold.Option{hold.FailIfHeldHere(), hold.FailIfHeldBy(l)} {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					_, err := hold.Acquire(ctx, s, append(opts[:len(opts):len(opts)], o)...)
					cancel()
					if !errors.Is(err, hold.ErrDeadlock) {
						t.Errorf("Acquire(%q) of the lock held as %q: %v, want ErrDeadlock at once", s, target, err)
					}
				}
			}
		})
	}
}

// TestDeadlockNamesCaller: a deadlock of a request made for another
// program (proc.WithCaller, as the agent asks for its client) names that
// program as the holder, with this process beside it, not this process
// alone.
func TestDeadlockNamesCaller(t *testing.T) {
	target := filepath.Join(t.TempDir(), "t")
	l, err := hold.TryAcquire(target)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	testenv.SkipUnderWine(t, "a process started from Linux has no Windows parent: its parent pid names no process")
	caller := os.Getppid()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, o := range []hold.Option{hold.FailIfHeldHere(), hold.FailIfHeldBy(l)} {
		_, err := hold.Acquire(proc.WithCaller(ctx, caller), target, o)
		want := fmt.Sprintf("(pid %d, through %s pid %d", caller, filepath.Base(os.Args[0]), os.Getpid())
		if !errors.Is(err, hold.ErrDeadlock) || !strings.Contains(err.Error(), want) {
			t.Errorf("Acquire for pid %d: %v, want ErrDeadlock naming %q", caller, err, want)
		}
	}
}
