package etcd_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/etcd"
	"github.com/hold-dev/hold/etcd/etcdtest"
)

// TestServerStopAndRestart: while etcd is down, longer than the TTL, a
// waiter keeps waiting (and says once that etcd is unreachable), a waiter
// whose context ends gets a clear error naming the holder, and the holder
// learns it lost the lock; after the restart the waiter that kept waiting
// gets the lock within its context.
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
	var notices atomic.Int32
	short := dialTo(t, eps, etcd.WithTTL(3*time.Second), etcd.WithRequestTimeout(time.Second))
	waiterP := dialTo(t, eps, etcd.WithTTL(3*time.Second), etcd.WithRequestTimeout(time.Second),
		etcd.WithOutageNotice(func(msg string) { notices.Add(1); t.Log("notice: ", msg) }))
	long := dialTo(t, eps, etcd.WithTTL(30*time.Second), etcd.WithRequestTimeout(time.Second))
	key := uniqueKey(t)
	holder, err := hold.Acquire(context.Background(), "", lockOpts(short, key)...)
	if err != nil {
		t.Fatal(err)
	}

	// Waiter A has a 3 s lease and a long context: it rides out the
	// outage, queueing again once etcd is back.
	// Waiter B has a long lease but a 5 s context: its context ends it.
	// It queues right behind the holder, so it knows the holder from
	// its first round trip, and names it when its wait ends.
	type result struct {
		err     error
		elapsed time.Duration
	}
	aDone, bDone := make(chan result, 1), make(chan result, 1)
	actx, acancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer acancel()
	go func() {
		bctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err := hold.Acquire(bctx, "", lockOpts(long, key)...)
		bDone <- result{err, time.Since(start)}
	}()
	waitKeys(t, rawClient(t, eps...), key, 2)

	go func() {
		l, err := hold.Acquire(actx, "", lockOpts(waiterP, key)...)
		if err == nil {
			err = l.Release()
		}
		aDone <- result{err: err}
	}()
	waitKeys(t, rawClient(t, eps...), key, 3)
	stopped := time.Now()
	c.Members[0].Stop()

	select {
	case r := <-bDone:
		// ErrTimeout, saying etcd is unreachable and naming the holder.
		var he *hold.Error
		if !errors.As(r.err, &he) || !errors.Is(r.err, hold.ErrTimeout) {
			t.Errorf("waiter B = %v, want ErrTimeout", r.err)
		} else {
			if !strings.Contains(r.err.Error(), "unreachable") {
				t.Errorf("waiter B's error does not say etcd is unreachable: %v", r.err)
			}
			if he.Holder == nil || he.Holder.Owner == nil {
				t.Errorf("waiter B's error does not name the holder: %v", r.err)
			}
		}
		if r.elapsed > 10*time.Second {
			t.Errorf("waiter B with a 5s context returned after %s", r.elapsed)
		}
		t.Logf("waiter B after %s: %v", r.elapsed.Round(time.Millisecond), r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("waiter B still waiting 30s after etcd stopped")
	}
	waitClosed(t, holder.Lost(), "holder's Lost while etcd is down")
	t.Logf("holder lost after %s", time.Since(stopped).Round(time.Millisecond))
	if err := holder.Release(); !errors.Is(err, hold.ErrLost) {
		t.Errorf("holder Release while etcd is down = %v, want ErrLost", err)
	}
	// Down for several TTLs of waiter A's lease.
	time.Sleep(4 * time.Second)
	select {
	case r := <-aDone:
		t.Fatalf("waiter A gave up while etcd was down (%s): %v", time.Since(stopped).Round(time.Millisecond), r.err)
	default:
	}

	if err := c.Members[0].Start(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	select {
	case r := <-aDone:
		if r.err != nil {
			t.Fatalf("waiter A after the restart: %v", r.err)
		}
		t.Logf("waiter A got the lock %s after the restart, %s after etcd stopped",
			time.Since(restarted).Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
	case <-time.After(40 * time.Second):
		t.Fatal("waiter A did not get the lock within 40s of the restart")
	}
	if n := notices.Load(); n != 1 {
		t.Errorf("waiter A gave %d outage notices, want 1", n)
	}
	l, err := hold.Acquire(ctxTimeout(t, 30*time.Second), "", lockOpts(short, key)...)
	if err != nil {
		t.Fatalf("Acquire after restart: %v", err)
	}
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
