package etcd_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/etcd"
	"github.com/hold-dev/hold/etcd/etcdtest"
)

// TestServerStopAndRestart: while etcd is down a waiter gets a clear error
// within its context (or sooner, once its lease cannot be renewed), the
// holder learns it lost the lock, and after a restart locking works again.
func TestServerStopAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own etcd server")
	}
	c, err := etcdtest.Start(t.TempDir(), etcdtest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	eps := c.Endpoints()
	short := dialTo(t, eps, etcd.WithTTL(time.Second), etcd.WithRequestTimeout(time.Second))
	long := dialTo(t, eps, etcd.WithTTL(30*time.Second), etcd.WithRequestTimeout(time.Second))
	key := uniqueKey(t)
	holder, err := hold.Acquire(context.Background(), "", lockOpts(short, key)...)
	if err != nil {
		t.Fatal(err)
	}

	// Waiter A has a long context but a 1 s lease: losing contact ends
	// its wait when the lease can no longer be renewed.
	// Waiter B has a long lease but a 3 s context: its context ends it.
	type result struct {
		err     error
		elapsed time.Duration
	}
	aDone, bDone := make(chan result, 1), make(chan result, 1)
	actx, acancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer acancel()
	go func() {
		_, err := hold.Acquire(actx, "", lockOpts(short, key)...)
		aDone <- result{err: err}
	}()
	waitKeys(t, rawClient(t, eps...), key, 2)
	go func() {
		bctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		_, err := hold.Acquire(bctx, "", lockOpts(long, key)...)
		bDone <- result{err, time.Since(start)}
	}()
	waitKeys(t, rawClient(t, eps...), key, 3)

	stopped := time.Now()
	c.Members[0].Stop()

	select {
	case r := <-aDone:
		// Normally ErrUnreachable; ErrLost if the lease ran out while
		// the dying server still held the connection open.
		var he *hold.Error
		if !errors.As(r.err, &he) || !(errors.Is(r.err, etcd.ErrUnreachable) || errors.Is(r.err, hold.ErrLost)) {
			t.Errorf("waiter A = %v, want ErrUnreachable", r.err)
		}
		t.Logf("waiter A after %s: %v", time.Since(stopped).Round(time.Millisecond), r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("waiter A still waiting 30s after etcd stopped")
	}
	select {
	case r := <-bDone:
		// Normally ErrTimeout with a hint that etcd is unreachable; a
		// round trip that failed first gives ErrUnreachable itself.
		var he *hold.Error
		if !errors.As(r.err, &he) || !(errors.Is(r.err, hold.ErrTimeout) || errors.Is(r.err, etcd.ErrUnreachable)) {
			t.Errorf("waiter B = %v, want ErrTimeout or ErrUnreachable", r.err)
		} else if !strings.Contains(r.err.Error(), "unreachable") {
			t.Logf("waiter B's error does not say etcd is unreachable: %v", r.err)
		}
		if r.elapsed > 10*time.Second {
			t.Errorf("waiter B with a 3s context returned after %s", r.elapsed)
		}
		t.Logf("waiter B after %s: %v", r.elapsed.Round(time.Millisecond), r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("waiter B still waiting 30s after etcd stopped")
	}
	waitClosed(t, holder.Lost(), "holder's Lost while etcd is down")
	if err := holder.Release(); !errors.Is(err, hold.ErrLost) {
		t.Errorf("holder Release while etcd is down = %v, want ErrLost", err)
	}

	if err := c.Members[0].Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The client reconnects within moments; until it has, Acquire fails
	// fast with ErrUnreachable, as a caller would see, and is tried again.
	// The leases of the old holder and waiters are revoked once etcd is
	// back (or expire), and then the lock is ours.
	var l *hold.Lock
	for {
		l, err = hold.Acquire(ctx, "", lockOpts(short, key)...)
		if err == nil {
			break
		}
		if !errors.Is(err, etcd.ErrUnreachable) || ctx.Err() != nil {
			t.Fatalf("Acquire after restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("locked again %s after the restart", time.Since(restarted).Round(time.Millisecond))
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestClusterMemberDown: with one member of three stopped (the leader),
// locking goes on, in order and with growing tokens.
func TestClusterMemberDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-member cluster")
	}
	c, err := etcdtest.Start(t.TempDir(), etcdtest.Config{Members: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := dialTo(t, c.Endpoints(), etcd.WithTTL(5*time.Second))
	key := uniqueKey(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	l, err := hold.Acquire(ctx, "", lockOpts(p, key)...)
	if err != nil {
		t.Fatal(err)
	}
	last := l.Token()
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}

	// Stop the leader, the hardest member to lose.
	if m := c.Leader(); m != nil {
		m.Stop()
	} else {
		c.Members[0].Stop()
	}

	const workers, each = 3, 10
	errs := make(chan error, workers)
	tokens := make(chan uint64, workers*each)
	for w := 0; w < workers; w++ {
		go func() {
			for i := 0; i < each; i++ {
				l, err := hold.Acquire(ctx, "", lockOpts(p, key)...)
				if err != nil {
					errs <- err
					return
				}
				tokens <- l.Token()
				if err := l.Release(); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < workers; w++ {
		if err := <-errs; err != nil {
			t.Fatalf("locking with a member down: %v", err)
		}
	}
	close(tokens)
	n := 0
	for tok := range tokens {
		// Each token was sent while its lock was held, so the channel
		// has them in lock order.
		if tok <= last {
			t.Errorf("token %d after %d: tokens must grow in lock order", tok, last)
		}
		last = tok
		n++
	}
	if n != workers*each {
		t.Errorf("%d acquisitions, want %d", n, workers*each)
	}
}
