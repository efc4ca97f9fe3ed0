package etcd_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/hold-dev/hold"
)

// stockTTL is the session TTL of the stock mutex in the benchmarks, the
// same as hold's default.
const stockTTL = 15

// locker takes a lock and returns its release.
type locker func(ctx context.Context) (release func() error, err error)

// holdLocker locks key through a new connection.
func holdLocker(b *testing.B, key string) locker {
	opts := lockOpts(dial(b), key)
	return func(ctx context.Context) (func() error, error) {
		l, err := hold.Acquire(ctx, "", opts...)
		if err != nil {
			return nil, err
		}
		return l.Release, nil
	}
}

// stockLocker locks key with etcd's concurrency.Mutex through a new
// connection, with a session (lease) per acquisition as hold has it and as
// `etcdctl lock` does.
func stockLocker(b *testing.B, key string) locker {
	c := rawClient(b)
	return func(ctx context.Context) (func() error, error) {
		s, err := concurrency.NewSession(c, concurrency.WithTTL(stockTTL))
		if err != nil {
			return nil, err
		}
		m := concurrency.NewMutex(s, key)
		if err := m.Lock(ctx); err != nil {
			s.Close()
			return nil, err
		}
		return func() error {
			if err := m.Unlock(ctx); err != nil {
				return err
			}
			return s.Close()
		}, nil
	}
}

// BenchmarkUncontended: one client locks and unlocks a free lock.
// "hold" is Acquire and Release; "hold-do" is hold.Do, which also watches
// the key for loss (Lost) while fn runs. "stock" is concurrency.Mutex with
// a session per lock, as `etcdctl lock` has it; "stock-one-session" reuses
// one session for every lock, as hold reuses its lease.
func BenchmarkUncontended(b *testing.B) {
	run := func(b *testing.B, lk locker) {
		ctx := context.Background()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			release, err := lk(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := release(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("hold", func(b *testing.B) { run(b, holdLocker(b, uniqueKey(b))) })
	b.Run("hold-do", func(b *testing.B) {
		opts := lockOpts(dial(b), uniqueKey(b))
		ctx := context.Background()
		nothing := func(context.Context) error { return nil }
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := hold.Do(ctx, "", nothing, opts...); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stock", func(b *testing.B) { run(b, stockLocker(b, uniqueKey(b))) })
	b.Run("stock-one-session", func(b *testing.B) { run(b, stockSessionLocker(b, uniqueKey(b))) })
}

// stockSessionLocker locks key with etcd's concurrency.Mutex on one
// session (lease) kept for every lock, through a new connection.
func stockSessionLocker(b *testing.B, key string) locker {
	s, err := concurrency.NewSession(rawClient(b), concurrency.WithTTL(stockTTL))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	m := concurrency.NewMutex(s, key)
	return func(ctx context.Context) (func() error, error) {
		return func() error { return m.Unlock(ctx) }, m.Lock(ctx)
	}
}

// BenchmarkContended: 8 clients, each on its own connection, take turns on
// one lock; an iteration is one hand-off. The handoffs/s metric is the
// throughput.
func BenchmarkContended(b *testing.B) {
	const clients = 8
	run := func(b *testing.B, newLocker func(*testing.B, string) locker) {
		key := uniqueKey(b)
		lockers := make([]locker, clients)
		for i := range lockers {
			lockers[i] = newLocker(b, key)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var taken atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		b.ResetTimer()
		start := time.Now()
		for _, lk := range lockers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for taken.Add(1) <= int64(b.N) {
					release, err := lk(ctx)
					if err != nil {
						errs <- err
						return
					}
					if err := release(); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		b.StopTimer()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "handoffs/s")
	}
	b.Run("hold", func(b *testing.B) { run(b, holdLocker) })
	b.Run("stock", func(b *testing.B) { run(b, stockLocker) })
}

// BenchmarkUncontendedInterleaved measures hold and the stock mutex on a
// reused session in alternation, one cycle of each per iteration, so that
// the load of a shared machine falls on both alike. It reports each one's
// time per lock+unlock and their ratio (goal: hold/stock ≤ 1.2).
func BenchmarkUncontendedInterleaved(b *testing.B) {
	holdLk := holdLocker(b, uniqueKey(b))
	stockLk := stockSessionLocker(b, uniqueKey(b))
	ctx := context.Background()
	var holdTime, stockTime time.Duration
	cycle := func(lk locker) time.Duration {
		start := time.Now()
		release, err := lk(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := release(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			holdTime += cycle(holdLk)
			stockTime += cycle(stockLk)
		} else {
			stockTime += cycle(stockLk)
			holdTime += cycle(holdLk)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(holdTime.Microseconds())/n, "hold-µs/op")
	b.ReportMetric(float64(stockTime.Microseconds())/n, "stock-µs/op")
	b.ReportMetric(float64(holdTime)/float64(stockTime), "hold/stock")
}
