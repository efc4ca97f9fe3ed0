//go:build unix

package hold_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold"
)

// The benchmarks put hold's cost beside the bare system calls it is built
// on, measured in the same run, because absolute numbers on a shared
// machine say little. Compare:
//
//	BenchmarkAcquireRelease     with BenchmarkRawFlockUnlock (flock+unlock on one fd)
//	                            and  BenchmarkRawOpenFlockClose (open+flock+unlock+close)
//	BenchmarkTryAcquireBusy     with BenchmarkRawTryBusy and BenchmarkRawOpenTryBusy

func BenchmarkAcquireRelease(b *testing.B) {
	target := filepath.Join(b.TempDir(), "t")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := hold.Acquire(ctx, target)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAcquireReleaseShared(b *testing.B) {
	target := filepath.Join(b.TempDir(), "t")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := hold.Acquire(ctx, target, hold.Shared())
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawFlockUnlock(b *testing.B) {
	fd := rawOpen(b, filepath.Join(b.TempDir(), "t.lock"))
	b.ReportAllocs()
	for b.Loop() {
		if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
			b.Fatal(err)
		}
		if err := unix.Flock(fd, unix.LOCK_UN); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawOpenFlockClose(b *testing.B) {
	path := filepath.Join(b.TempDir(), "t.lock")
	b.ReportAllocs()
	for b.Loop() {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o666)
		if err != nil {
			b.Fatal(err)
		}
		if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
			b.Fatal(err)
		}
		if err := unix.Flock(fd, unix.LOCK_UN); err != nil {
			b.Fatal(err)
		}
		unix.Close(fd)
	}
}

func BenchmarkTryAcquireBusy(b *testing.B) {
	target := filepath.Join(b.TempDir(), "t")
	l, err := hold.Acquire(context.Background(), target)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Release()
	b.ReportAllocs()
	for b.Loop() {
		_, err := hold.TryAcquire(target)
		if !errors.Is(err, hold.ErrBusy) {
			b.Fatalf("TryAcquire on a held lock: %v, want ErrBusy", err)
		}
	}
}

func BenchmarkRawTryBusy(b *testing.B) {
	path := filepath.Join(b.TempDir(), "t.lock")
	holder := rawOpen(b, path)
	if err := unix.Flock(holder, unix.LOCK_EX); err != nil {
		b.Fatal(err)
	}
	fd := rawOpen(b, path)
	b.ReportAllocs()
	for b.Loop() {
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != unix.EWOULDBLOCK {
			b.Fatalf("flock on a held lock: %v, want EWOULDBLOCK", err)
		}
	}
}

func BenchmarkRawOpenTryBusy(b *testing.B) {
	path := filepath.Join(b.TempDir(), "t.lock")
	holder := rawOpen(b, path)
	if err := unix.Flock(holder, unix.LOCK_EX); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o666)
		if err != nil {
			b.Fatal(err)
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != unix.EWOULDBLOCK {
			b.Fatalf("flock on a held lock: %v, want EWOULDBLOCK", err)
		}
		unix.Close(fd)
	}
}

// rawOpen opens path for the raw baselines and closes it when b ends.
func rawOpen(b *testing.B, path string) int {
	b.Helper()
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o666)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(fd) })
	return fd
}
