package hold

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/atomicfile"
)

// Benchmarks of Append and Update beside the same operation without the
// lock, and without the fsyncs, measured in the same run so that the
// lock's share and the fsync's share can be read off on a noisy machine:
//
//	lock's share of Append  = BenchmarkAppend / BenchmarkAppendNoLock - 1
//	fsync's share of Append = 1 - BenchmarkAppendNoLockNoSync / BenchmarkAppendNoLock
//
// and the same for Update. "NoLock" runs the very code Append and Update
// run under the lock (internal/atomicfile); "NoSync" runs it through a file
// system whose fsyncs do nothing.

// noSyncFS is the real file system with fsync turned off.
type noSyncFS struct{ atomicfile.OS }

func (noSyncFS) SyncDir(string) error { return nil }

func (f noSyncFS) OpenFile(name string, flag int, perm fs.FileMode) (atomicfile.File, error) {
	file, err := f.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{file}, nil
}

type noSyncFile struct{ atomicfile.File }

func (noSyncFile) Sync() error { return nil }

var benchRecord = []byte("2026-11-29T15:00:00Z worker-7 finished job 4242 in 1.2s\n") // 57 bytes

func BenchmarkAppend(b *testing.B) {
	path := filepath.Join(b.TempDir(), "log")
	ctx := context.Background()
	for b.Loop() {
		if err := Append(ctx, path, benchRecord); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendNoLock(b *testing.B) {
	path := filepath.Join(b.TempDir(), "log")
	for b.Loop() {
		if err := atomicfile.AppendTo(atomicfile.OS{}, path, false, benchRecord, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendNoLockNoSync(b *testing.B) {
	path := filepath.Join(b.TempDir(), "log")
	for b.Loop() {
		if err := atomicfile.AppendTo(noSyncFS{}, path, false, benchRecord, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// bump is the change every Update benchmark makes: a small JSON document
// whose counter goes up, so each iteration really writes.
func bump() func([]byte) ([]byte, error) {
	n := 0
	return func([]byte) ([]byte, error) {
		n++
		return fmt.Appendf(nil, `{"hooks":["lint","test"],"n":%d}`+"\n", n), nil
	}
}

func BenchmarkUpdate(b *testing.B) {
	path := filepath.Join(b.TempDir(), "hooks.json")
	ctx := context.Background()
	fn := bump()
	for b.Loop() {
		if err := Update(ctx, path, fn); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUpdateNoLock(b *testing.B) {
	path := filepath.Join(b.TempDir(), "hooks.json")
	fn := bump()
	for b.Loop() {
		if err := atomicfile.Update(atomicfile.OS{}, path, false, fn, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUpdateNoLockNoSync(b *testing.B) {
	path := filepath.Join(b.TempDir(), "hooks.json")
	fn := bump()
	for b.Loop() {
		if err := atomicfile.Update(noSyncFS{}, path, false, fn, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// The paired benchmarks below run the three variants in turn, one
// operation each, and report the median time of each variant: on a shared
// machine whose disk other processes keep busy, drift and spikes then hit
// all three alike and the medians compare like with like. Reported:
//
//	locked-µs  median of one Append (Update) with the lock
//	nolock-µs  median of the same operation without the lock
//	nosync-µs  median without the lock and without fsync
//	lock-%     (locked - nolock) / nolock
//	fsync-%    (nolock - nosync) / nolock

func BenchmarkAppendPaired(b *testing.B) {
	dir := b.TempDir()
	locked, nolock, nosync := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	ctx := context.Background()
	pairedBench(b,
		func() error { return Append(ctx, locked, benchRecord) },
		func() error { return atomicfile.AppendTo(atomicfile.OS{}, nolock, false, benchRecord, nil) },
		func() error { return atomicfile.AppendTo(noSyncFS{}, nosync, false, benchRecord, nil) })
}

func BenchmarkUpdatePaired(b *testing.B) {
	dir := b.TempDir()
	locked, nolock, nosync := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"), filepath.Join(dir, "c.json")
	ctx := context.Background()
	f1, f2, f3 := bump(), bump(), bump()
	pairedBench(b,
		func() error { return Update(ctx, locked, f1) },
		func() error { return atomicfile.Update(atomicfile.OS{}, nolock, false, f2, nil) },
		func() error { return atomicfile.Update(noSyncFS{}, nosync, false, f3, nil) })
}

func pairedBench(b *testing.B, locked, nolock, nosync func() error) {
	var times [3][]time.Duration
	ops := [3]func() error{locked, nolock, nosync}
	i := 0
	for b.Loop() {
		// Rotate which variant goes first, so none always follows another.
		for k := range 3 {
			v := (i + k) % 3
			start := time.Now()
			if err := ops[v](); err != nil {
				b.Fatal(err)
			}
			times[v] = append(times[v], time.Since(start))
		}
		i++
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2]) / float64(time.Microsecond)
	}
	l, n, s := med(times[0]), med(times[1]), med(times[2])
	b.ReportMetric(l, "locked-µs")
	b.ReportMetric(n, "nolock-µs")
	b.ReportMetric(s, "nosync-µs")
	b.ReportMetric(100*(l-n)/n, "lock-%")
	b.ReportMetric(100*(n-s)/n, "fsync-%")
}
