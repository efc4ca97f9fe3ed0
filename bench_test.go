//go:build unix

package hold_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

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

// BenchmarkTryAcquireBusy measures the refusal a caller sees: open, a
// failed flock, and reading who holds the lock (the owner record, and
// whether that process is alive). The holder is another process, as it
// would be in use.
// BenchmarkRawOpenFlockRecordClose is the floor for any kernel lock that
// keeps a record in its lock file: what RawOpenFlockClose does plus the
// fstat, pread and pwrite hold needs (type check, last token, new record).
func BenchmarkRawOpenFlockRecordClose(b *testing.B) {
	path := filepath.Join(b.TempDir(), "t.lock")
	rec := make([]byte, 200)
	for i := range rec {
		rec[i] = 'x'
	}
	var buf [2048]byte
	var st unix.Stat_t
	b.ReportAllocs()
	for b.Loop() {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o666)
		if err != nil {
			b.Fatal(err)
		}
		if err := unix.Fstat(fd, &st); err != nil {
			b.Fatal(err)
		}
		if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
			b.Fatal(err)
		}
		if _, err := unix.Pread(fd, buf[:], 0); err != nil {
			b.Fatal(err)
		}
		if _, err := unix.Pwrite(fd, rec, 0); err != nil {
			b.Fatal(err)
		}
		if err := unix.Flock(fd, unix.LOCK_UN); err != nil {
			b.Fatal(err)
		}
		unix.Close(fd)
	}
}

func BenchmarkTryAcquireBusy(b *testing.B) {
	dir := b.TempDir()
	target := filepath.Join(dir, "t")
	w := startCoreWorker(b, "core-hold", "CORE_TARGET="+target, "CORE_RELEASE="+filepath.Join(dir, "release"))
	w.report(b, hangBound)
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

// BenchmarkTimeoutLateness measures how long after its deadline a waiting
// Acquire returns (the issue asks for well under 10 ms): each iteration
// waits 1 ms on a held lock. The metrics are the median and the worst
// lateness; ns/op is dominated by the 1 ms wait itself.
func BenchmarkTimeoutLateness(b *testing.B) {
	target := filepath.Join(b.TempDir(), "t")
	var late []time.Duration
	for b.Loop() {
		holder, err := hold.Acquire(context.Background(), target)
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		deadline, _ := ctx.Deadline()
		_, err = hold.Acquire(ctx, target)
		late = append(late, time.Since(deadline))
		cancel()
		if !errors.Is(err, hold.ErrTimeout) {
			b.Fatalf("Acquire on a held lock past its deadline: %v", err)
		}
		// Let the abandoned wait take the lock and hand it back.
		holder.Release()
	}
	slices.Sort(late)
	b.ReportMetric(float64(late[len(late)/2].Microseconds()), "late-median-µs")
	b.ReportMetric(float64(late[len(late)-1].Microseconds()), "late-max-µs")
}
