package etcd_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/etcd"
	"github.com/hold-dev/hold/internal/faultnet"
)

// TestPartitionedHolderLosesEarly: a holder cut off from etcd (behind a
// proxy that stops forwarding) is told its lock is lost at least
// StopWithin before etcd can let the lease expire and a waiter take the
// lock: the send time of its last acknowledged keep-alive plus the TTL.
func TestPartitionedHolderLosesEarly(t *testing.T) {
	u, err := url.Parse(testEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	px, err := faultnet.NewProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	const ttl, stopWithin = 6 * time.Second, 1500 * time.Millisecond
	holderP := dialTo(t, []string{"http://" + px.Addr()}, etcd.WithTTL(ttl), etcd.WithRequestTimeout(time.Second))
	waiterP := dial(t)
	key := uniqueKey(t)
	l, err := hold.Acquire(ctxTimeout(t, 20*time.Second), "", append(lockOpts(holderP, key), hold.StopWithin(stopWithin))...)
	if err != nil {
		t.Fatal(err)
	}
	lost := l.Lost()
	got := make(chan error, 1)
	var acquiredAt time.Time
	go func() {
		w, err := hold.Acquire(ctxTimeout(t, 40*time.Second), "", lockOpts(waiterP, key)...)
		if err == nil {
			acquiredAt = time.Now()
			err = w.Release()
		}
		got <- err
	}()
	waitKeys(t, rawClient(t), key, 2)
	cutAt := time.Now()
	px.Cut()
	var lostAt time.Time
	select {
	case <-lost:
		lostAt = time.Now()
	case <-time.After(ttl + 10*time.Second):
		t.Fatal("the cut-off holder was not told it lost the lock")
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	t.Logf("cut; the holder was told after %s, the waiter got the lock after %s (TTL %s, StopWithin %s)",
		lostAt.Sub(cutAt).Round(time.Millisecond), acquiredAt.Sub(cutAt).Round(time.Millisecond), ttl, stopWithin)
	if early := acquiredAt.Sub(lostAt); early < stopWithin {
		t.Errorf("the holder was told %s before the waiter got the lock, want at least StopWithin %s", early, stopWithin)
	}
	if lostAt.Sub(cutAt) > ttl {
		t.Errorf("the holder was told %s after the cut, later than the TTL %s", lostAt.Sub(cutAt), ttl)
	}
	if err := l.Check(); !errors.Is(err, hold.ErrLost) {
		t.Errorf("Check of the cut-off lock = %v, want ErrLost", err)
	}
	px.Heal()
	if err := l.Release(); !errors.Is(err, hold.ErrLost) {
		t.Errorf("Release of the cut-off lock = %v, want ErrLost", err)
	}
}

// TestStopWithinLongerThanTTL: a StopWithin the lease cannot cover is
// refused with a hint, not honoured with a lock lost at once.
func TestStopWithinLongerThanTTL(t *testing.T) {
	p := dial(t, etcd.WithTTL(2*time.Second))
	_, err := hold.Acquire(context.Background(), "", append(lockOpts(p, uniqueKey(t)), hold.StopWithin(5*time.Second))...)
	var he *hold.Error
	if !errors.As(err, &he) || he.Hint == "" {
		t.Fatalf("Acquire with StopWithin past the TTL = %v, want an error with a hint", err)
	}
	t.Log(err)
}
