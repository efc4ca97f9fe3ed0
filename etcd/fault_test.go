package etcd_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/etcd"
	"github.com/hold-dev/hold/etcd/etcdtest"
	"github.com/hold-dev/hold/internal/faultnet"
)

// stallTrialsEnv sets how many trials TestStalledWaiter runs (default 2).
const stallTrialsEnv = "HOLD_TEST_STALL_TRIALS"

// TestStalledWaiter: H holds, W waits behind H, X behind W. W's connection
// stalls (its sockets stay open, nothing passes) for longer than its TTL,
// so etcd expires W's lease and deletes its key, and X goes ahead of it.
// H releases and X gets the lock. When W's connection resumes, the
// deletion of H's key that etcd buffered for W's watch arrives before the
// keep-alive that says W's lease is gone: W must not take that for the
// lock. It must queue again and get the lock only after X released it,
// with a larger token.
func TestStalledWaiter(t *testing.T) {
	trials := 2
	if v := os.Getenv(stallTrialsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of trials", stallTrialsEnv, v)
		}
		trials = n
	}
	u, err := url.Parse(testEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < trials; i++ {
		px, err := faultnet.NewProxy(u.Host)
		if err != nil {
			t.Fatal(err)
		}
		stalledWaiterTrial(t, i, px)
		px.Close()
		if t.Failed() {
			return
		}
	}
}

func stalledWaiterTrial(t *testing.T, trial int, px *faultnet.Proxy) {
	const ttl = 3 * time.Second
	hp, xp := dial(t), dial(t)
	wp := dialTo(t, []string{"http://" + px.Addr()}, etcd.WithTTL(ttl), etcd.WithRequestTimeout(time.Second))
	c := rawClient(t)
	key := uniqueKey(t)
	h := mustAcquire(t, hp, key)

	type grant struct {
		l   *hold.Lock
		err error
		at  time.Time
	}
	var xHolds atomic.Bool
	wDone, xDone := make(chan grant, 1), make(chan grant, 1)
	go func() {
		l, err := hold.Acquire(ctxTimeout(t, 60*time.Second), "", lockOpts(wp, key)...)
		// Read at once: whether X held the lock when W was granted.
		if xHolds.Load() {
			err = errors.New("W was granted the lock while X held it")
			if l != nil {
				t.Logf("W's token %d", l.Token())
			}
		}
		wDone <- grant{l, err, time.Now()}
	}()
	waitKeys(t, c, key, 2)
	go func() {
		l, err := hold.Acquire(ctxTimeout(t, 60*time.Second), "", lockOpts(xp, key)...)
		if err == nil {
			xHolds.Store(true)
		}
		xDone <- grant{l, err, time.Now()}
	}()
	waitKeys(t, c, key, 3)

	px.Cut()
	cut := time.Now()
	// etcd expires W's lease and deletes its key.
	waitKeys(t, c, key, 2)
	t.Logf("trial %d: W's key deleted %s after the cut", trial, time.Since(cut).Round(time.Millisecond))
	hTok := h.Token()
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	var x grant
	select {
	case x = <-xDone:
		if x.err != nil {
			t.Fatalf("X: %v", x.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("X not granted the lock within 20s of H's release")
	}
	px.Heal()
	// X holds on for a while: long enough for W to hear of H's release
	// and of its lease's end.
	select {
	case w := <-wDone:
		if w.err == nil {
			w.err = errors.New("W was granted the lock while X held it")
		}
		t.Fatalf("trial %d: W returned while X held the lock (X's token %d): %v", trial, x.l.Token(), w.err)
	case <-time.After(3 * time.Second):
	}
	xHolds.Store(false)
	xTok := x.l.Token()
	if err := x.l.Release(); err != nil {
		t.Fatalf("X's release: %v", err)
	}
	var w grant
	select {
	case w = <-wDone:
		if w.err != nil {
			t.Fatalf("trial %d: W: %v", trial, w.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("trial %d: W not granted the lock within 30s of X's release", trial)
	}
	wTok := w.l.Token()
	if err := w.l.Release(); err != nil {
		t.Errorf("W's release: %v", err)
	}
	t.Logf("trial %d: tokens in grant order: H %d, X %d, W %d", trial, hTok, xTok, wTok)
	if !(hTok < xTok && xTok < wTok) {
		t.Errorf("trial %d: tokens in grant order H %d, X %d, W %d: want strictly rising", trial, hTok, xTok, wTok)
	}
}

// longOutageEnv runs TestLostLockFreedAfterLongOutage with the outage of
// the report that found the problem: two minutes, with the real retry
// bounds and the default TTL.
const longOutageEnv = "HOLD_TEST_LONG_OUTAGE"

// TestLostLockFreedAfterLongOutage: a holder that keeps its Protocol
// through an etcd outage longer than its TTL (and than the time a failed
// revoke is retried) is told its lock is lost; when etcd comes back, its
// keep-alive renews the lease (a restarted etcd renews every lease), so
// the lost lock's key must be deleted for the lock to be free: another
// process gets it, and so does the holder itself.
func TestLostLockFreedAfterLongOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own etcd server")
	}
	ttl, outage := 3*time.Second, 9*time.Second
	if os.Getenv(longOutageEnv) != "" {
		ttl, outage = etcd.DefaultTTL, 2*time.Minute
	} else {
		// The outage outlasts the TTL and the retries of the old
		// bounded delete (TTL + revokeRetryFor) with room to spare.
		defer etcd.SetRevokeRetryFor(2 * time.Second)()
	}
	c, err := etcdtest.Start(t.TempDir(), etcdtest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	eps := c.Endpoints()
	p := dialTo(t, eps, etcd.WithTTL(ttl), etcd.WithRequestTimeout(time.Second))
	other := dialTo(t, eps, etcd.WithTTL(ttl), etcd.WithRequestTimeout(time.Second))
	key := uniqueKey(t)
	l := mustAcquire(t, p, key)
	lost := l.Lost()

	c.Members[0].Stop()
	stopped := time.Now()
	waitClosed(t, lost, "Lost of the lock while etcd is down")
	t.Logf("lost %s after etcd stopped: %v", time.Since(stopped).Round(time.Millisecond), l.Check())
	time.Sleep(time.Until(stopped.Add(outage)))
	if err := c.Members[0].Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	t.Logf("etcd back after %s", back.Sub(stopped).Round(time.Millisecond))

	// The process lives on with its Protocol, and takes another lock
	// on its lease, which its keep-alive renews.
	keep := mustAcquire(t, p, key+"-other")
	defer keep.Release()

	raw := rawClient(t, eps...)
	deadline := time.Now().Add(ttl + 30*time.Second)
	for countKeys(t, raw, key) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the lost lock's key is still there %s after etcd came back", time.Since(back).Round(time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the lost lock's key was gone %s after etcd came back (TTL %s)", time.Since(back).Round(time.Millisecond), ttl)
	o, err := hold.Acquire(ctxTimeout(t, 10*time.Second), "", lockOpts(other, key)...)
	if err != nil {
		t.Fatalf("another process after the outage: %v", err)
	}
	if err := o.Release(); err != nil {
		t.Fatal(err)
	}
	again, err := hold.Acquire(ctxTimeout(t, 10*time.Second), "", lockOpts(p, key)...)
	if err != nil {
		t.Fatalf("the holder's own acquisition after the outage: %v", err)
	}
	if err := again.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); !errors.Is(err, hold.ErrLost) {
		t.Errorf("Release of the lost lock = %v, want ErrLost", err)
	}
}

// TestCloseDuringWait: Close ends a waiting Acquire with an error, and no
// lease granted after Close is left for it to queue on again, even when
// the Protocol does not own its client (New), which stays open.
func TestCloseDuringWait(t *testing.T) {
	raw := rawClient(t)
	key := uniqueKey(t)
	holder := mustAcquire(t, dial(t), key)
	defer holder.Release()
	leases := func() map[clientv3.LeaseID]bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := raw.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := map[clientv3.LeaseID]bool{}
		for _, l := range resp.Leases {
			m[l.ID] = true
		}
		return m
	}

	client := rawClient(t)
	p := etcd.New(client, etcd.WithTTL(5*time.Second))
	done := make(chan error, 1)
	go func() {
		l, err := hold.Acquire(ctxTimeout(t, 60*time.Second), "", lockOpts(p, key)...)
		if err == nil {
			l.Release()
			err = errors.New("granted")
		}
		done <- err
	}()
	waitKeys(t, raw, key, 2)
	before := leases()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil || errors.Is(err, hold.ErrTimeout) || err.Error() == "granted" {
			t.Fatalf("Acquire waiting during Close = %v, want an error saying the protocol was closed", err)
		}
		t.Log(err)
	case <-time.After(20 * time.Second):
		t.Fatal("Acquire still waiting 20s after Close")
	}
	// Give a waiter that queued again time to show its key.
	time.Sleep(500 * time.Millisecond)
	if n := countKeys(t, raw, key); n != 1 {
		t.Errorf("%d keys after Close, want the holder's only", n)
	}
	for id := range leases() {
		if !before[id] {
			t.Errorf("lease %x was granted after Close and is still there", id)
		}
	}
	if _, err := hold.TryAcquire("", lockOpts(p, uniqueKey(t))...); err == nil {
		t.Error("TryAcquire after Close succeeded")
	}
}

// TestLateDeleteSparesLaterKey: the delete a lost lock starts in the
// background deletes only that lock's key: not the key of a later
// acquisition of the same process on the same lock, which has the same
// name and lease but another create revision.
func TestLateDeleteSparesLaterKey(t *testing.T) {
	p := dial(t)
	raw := rawClient(t)
	key := uniqueKey(t)
	first := mustAcquire(t, p, key)
	firstKV := holderKV(t, raw, key).Kvs[0]
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	second := mustAcquire(t, p, key)
	secondKV := holderKV(t, raw, key).Kvs[0]
	if string(secondKV.Key) != string(firstKV.Key) {
		t.Fatalf("the second acquisition has key %s, the first had %s: want the slot reused", secondKV.Key, firstKV.Key)
	}
	if !etcd.RemoveKey(p, string(firstKV.Key), firstKV.CreateRevision) {
		t.Fatal("the late delete did not finish")
	}
	if err := second.Check(); err != nil {
		t.Fatalf("the later lock after a late delete of the earlier one's key: %v", err)
	}
	if err := second.Release(); err != nil {
		t.Fatal(err)
	}
}
