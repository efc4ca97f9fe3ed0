package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/etcd"
	"github.com/hold-dev/hold/etcd/etcdtest"
	"github.com/hold-dev/hold/lock"
)

// countKeys returns how many keys (holder and waiters) a lock has.
func countKeys(t testing.TB, c *clientv3.Client, key string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, key+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Count
}

// waitKeys waits until the lock has n keys.
func waitKeys(t testing.TB, c *clientv3.Client, key string, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for countKeys(t, c, key) != n {
		if time.Now().After(deadline) {
			t.Fatalf("lock %s: want %d keys, have %d", key, n, countKeys(t, c, key))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// holderKey returns the holder's key-value.
// mustAcquire takes the lock on key through p, or fails the test.
func mustAcquire(t testing.TB, p *etcd.Protocol, key string) *hold.Lock {
	t.Helper()
	l, err := hold.Acquire(context.Background(), "", lockOpts(p, key)...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func holderKV(t testing.TB, c *clientv3.Client, key string) *clientv3.GetResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Get(ctx, key+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		t.Fatalf("lock %s has no holder", key)
	}
	return resp
}

func waitClosed(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: not signalled after 20s", what)
	}
}

func TestAcquireReleaseTokenOwner(t *testing.T) {
	p := dial(t)
	key := uniqueKey(t)
	ctx := context.Background()
	l1, err := hold.Acquire(ctx, "", lockOpts(p, key)...)
	if err != nil {
		t.Fatal(err)
	}
	if l1.Protocol() != "etcd" || l1.Path() != key {
		t.Errorf("Protocol, Path = %q, %q", l1.Protocol(), l1.Path())
	}
	o := l1.Owner()
	if o.PID != os.Getpid() || o.ID == "" || o.Protocol != "etcd" || o.StartedAt.IsZero() || o.Fence != l1.Token() {
		t.Errorf("owner record %+v", o)
	}
	st, err := hold.Inspect("", lockOpts(p, key)...)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != hold.HeldExclusive || st.Fence != l1.Token() || st.Holder == nil || st.Holder.Owner == nil ||
		st.Holder.Owner.ID != o.ID || st.Holder.Alive != hold.Alive {
		t.Errorf("Inspect while held: %+v holder %+v", st, st.Holder)
	}
	if err := l1.Check(); err != nil {
		t.Errorf("Check while held: %v", err)
	}
	if err := l1.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l1.Release(); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if err := l1.Check(); !errors.Is(err, hold.ErrReleased) {
		t.Errorf("Check after Release = %v, want ErrReleased", err)
	}
	if n := countKeys(t, rawClient(t), key); n != 0 {
		t.Errorf("%d keys left after release", n)
	}
	st, err = hold.Inspect("", lockOpts(p, key)...)
	if err != nil || st.State != hold.Free {
		t.Errorf("Inspect after release: %+v, %v", st, err)
	}
	l2, err := hold.TryAcquire("", lockOpts(p, key)...)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release()
	if l2.Token() <= l1.Token() {
		t.Errorf("second token %d not above first %d", l2.Token(), l1.Token())
	}
}

func TestTryAcquireBusyNamesHolder(t *testing.T) {
	p := dial(t)
	key := uniqueKey(t)
	l, err := hold.Acquire(context.Background(), "", append(lockOpts(p, key), hold.Field("job", "nightly"))...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	_, err = hold.TryAcquire("", lockOpts(p, key)...)
	var he *hold.Error
	if !errors.Is(err, hold.ErrBusy) || !errors.As(err, &he) {
		t.Fatalf("TryAcquire on a held lock = %v, want *hold.Error matching ErrBusy", err)
	}
	if he.Holder == nil || he.Holder.Owner == nil || he.Holder.Owner.PID != os.Getpid() || he.Holder.Owner.Fields["job"] != "nightly" {
		t.Errorf("busy error holder = %+v", he.Holder)
	}
	if !strings.Contains(err.Error(), "held by pid") {
		t.Errorf("message does not name the holder: %v", err)
	}
	// The failed try left no key behind.
	if n := countKeys(t, rawClient(t), key); n != 1 {
		t.Errorf("%d keys, want only the holder's", n)
	}
}

// TestFIFO: waiters get the lock in the order they queued.
func TestFIFO(t *testing.T) {
	p := dial(t)
	c := rawClient(t)
	key := uniqueKey(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	first, err := hold.Acquire(ctx, "", lockOpts(p, key)...)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 6
	var mu sync.Mutex
	var order []int
	var tokens []uint64
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for i := 0; i < waiters; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := hold.Acquire(ctx, "", lockOpts(p, key)...)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			order = append(order, i)
			tokens = append(tokens, l.Token())
			mu.Unlock()
			time.Sleep(time.Millisecond)
			if err := l.Release(); err != nil {
				errs <- err
			}
		}()
		waitKeys(t, c, key, int64(i+2)) // queued before the next one starts
	}
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, w := range order {
		if w != i {
			t.Fatalf("waiters acquired in order %v, want queue order", order)
		}
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens %v not increasing", tokens)
		}
	}
}

// TestCancelledWaitLeavesNoKey: a wait that ctx ends returns promptly with
// ErrTimeout naming the holder, revokes its key, and the waiter behind it
// moves up.
func TestCancelledWaitLeavesNoKey(t *testing.T) {
	p := dial(t)
	c := rawClient(t)
	key := uniqueKey(t)
	holder, err := hold.Acquire(context.Background(), "", lockOpts(p, key)...)
	if err != nil {
		t.Fatal(err)
	}
	impatient, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = hold.Acquire(impatient, "", lockOpts(p, key)...)
	elapsed := time.Since(start)
	var he *hold.Error
	if !errors.Is(err, hold.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &he) || he.Holder == nil {
		t.Fatalf("timed-out Acquire = %v, want ErrTimeout naming the holder", err)
	}
	if elapsed > 5*time.Second {
		t.Errorf("timed-out Acquire took %s", elapsed)
	}
	if n := countKeys(t, c, key); n != 1 {
		t.Errorf("%d keys after the abandoned wait, want 1", n)
	}

	// A cancelled waiter in the middle of the queue: the one behind it
	// must not be stranded.
	midCtx, midCancel := context.WithCancel(context.Background())
	midDone := make(chan error, 1)
	go func() {
		_, err := hold.Acquire(midCtx, "", lockOpts(p, key)...)
		midDone <- err
	}()
	waitKeys(t, c, key, 2)
	lastDone := make(chan error, 1)
	go func() {
		l, err := hold.Acquire(context.Background(), "", lockOpts(p, key)...)
		if err == nil {
			err = l.Release()
		}
		lastDone <- err
	}()
	waitKeys(t, c, key, 3)
	midCancel()
	if err := <-midDone; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Acquire = %v, want context.Canceled", err)
	}
	waitKeys(t, c, key, 2)
	if err := holder.Release(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-lastDone:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter behind a cancelled one never got the lock")
	}
}

// TestLostOnRevokedLease: revoking the holder's lease closes Lost, Check
// and Release report ErrLost, and the lock is free for others.
func TestLostOnRevokedLease(t *testing.T) {
	p := dial(t)
	c := rawClient(t)
	key := uniqueKey(t)
	l := mustAcquire(t, p, key)
	kv := holderKV(t, c, key).Kvs[0]
	if _, err := c.Revoke(context.Background(), clientv3.LeaseID(kv.Lease)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, l.Lost(), "Lost after lease revoke")
	if err := l.Check(); !errors.Is(err, hold.ErrLost) {
		t.Errorf("Check = %v, want ErrLost", err)
	}
	for i := 0; i < 2; i++ {
		if err := l.Release(); !errors.Is(err, hold.ErrLost) {
			t.Errorf("Release #%d = %v, want ErrLost", i+1, err)
		}
	}
	l2, err := hold.TryAcquire("", lockOpts(p, key)...)
	if err != nil {
		t.Fatalf("lock not free after the holder lost it: %v", err)
	}
	l2.Release()
}

// TestCheckSeesDeletedKey: Check asks etcd, so it reports a deleted key
// even when nobody watches Lost.
func TestCheckSeesDeletedKey(t *testing.T) {
	p := dial(t)
	c := rawClient(t)
	key := uniqueKey(t)
	l := mustAcquire(t, p, key)
	if _, err := c.Delete(context.Background(), key+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); !errors.Is(err, hold.ErrLost) {
		t.Errorf("Check after the key was deleted = %v, want ErrLost", err)
	}
	select {
	case <-l.Lost():
	default:
		t.Error("Lost not closed after Check found the lock lost")
	}
	if err := l.Release(); !errors.Is(err, hold.ErrLost) {
		t.Errorf("Release = %v, want ErrLost", err)
	}

	// Release alone finds it out too.
	l = mustAcquire(t, p, key)
	if _, err := c.Delete(context.Background(), key+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); !errors.Is(err, hold.ErrLost) {
		t.Errorf("Release of a deleted key = %v, want ErrLost", err)
	}
}

// TestLostCancelsDo: deleting the holder's key cancels the context Do gave
// fn, and Do reports ErrLost.
func TestLostCancelsDo(t *testing.T) {
	p := dial(t)
	c := rawClient(t)
	key := uniqueKey(t)
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- hold.Do(context.Background(), "", func(ctx context.Context) error {
			close(started)
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(30 * time.Second):
				return errors.New("fn's context was not cancelled")
			}
		}, lockOpts(p, key)...)
	}()
	waitClosed(t, started, "Do running fn")
	if _, err := c.Delete(context.Background(), key+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, hold.ErrLost) {
			t.Fatalf("Do = %v, want ErrLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Do did not return after its key was deleted")
	}
}

// TestLostOnOverwrite: a key rewritten by someone else is no longer ours.
func TestLostOnOverwrite(t *testing.T) {
	p := dial(t)
	c := rawClient(t)
	key := uniqueKey(t)
	l := mustAcquire(t, p, key)
	kv := holderKV(t, c, key).Kvs[0]
	if _, err := c.Put(context.Background(), string(kv.Key), "{}", clientv3.WithLease(clientv3.LeaseID(kv.Lease))); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, l.Lost(), "Lost after overwrite")
	if err := l.Release(); !errors.Is(err, hold.ErrLost) {
		t.Errorf("Release = %v, want ErrLost", err)
	}
}

// TestInteropWithConcurrencyMutex: hold and etcd's own mutex (etcdctl lock)
// exclude each other on the same prefix.
func TestInteropWithConcurrencyMutex(t *testing.T) {
	p := dial(t)
	c := rawClient(t)
	key := uniqueKey(t)
	ctx := context.Background()
	s, err := concurrency.NewSession(c, concurrency.WithTTL(10))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := concurrency.NewMutex(s, key)
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = hold.TryAcquire("", lockOpts(p, key)...)
	if !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("TryAcquire while etcd's mutex holds = %v, want ErrBusy", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := hold.TryAcquire("", lockOpts(p, key)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.TryLock(ctx); !errors.Is(err, concurrency.ErrLocked) {
		t.Errorf("mutex TryLock while hold holds = %v, want ErrLocked", err)
	}
	l.Release()
}

func TestBreak(t *testing.T) {
	p := dial(t)
	key := uniqueKey(t)
	l := mustAcquire(t, p, key)
	if _, err := p.Break(key, false); !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("Break of a live holder without force = %v, want ErrBusy", err)
	}
	st, err := p.Break(key, true)
	if err != nil || st.State != hold.HeldExclusive {
		t.Fatalf("forced Break = %+v, %v", st, err)
	}
	waitClosed(t, l.Lost(), "Lost after forced break")
	if err := l.Release(); !errors.Is(err, hold.ErrLost) {
		t.Errorf("Release after break = %v, want ErrLost", err)
	}
}

func TestBadInput(t *testing.T) {
	p := dial(t)
	for _, key := range []string{"locks/x/", "a\x00b", "tab\there", string([]byte{0xff, 0xfe}), strings.Repeat("k", 600)} {
		_, err := hold.TryAcquire("", lockOpts(p, key)...)
		if !errors.Is(err, hold.ErrInvalidName) {
			t.Errorf("TryAcquire(%q) = %v, want ErrInvalidName", key, err)
		}
		if _, err := hold.Inspect("", lockOpts(p, key)...); !errors.Is(err, hold.ErrInvalidName) {
			t.Errorf("Inspect(%q) = %v, want ErrInvalidName", key, err)
		}
	}
	// A semaphore's places are exclusive: shared ones are a bad request.
	if _, err := p.TryAcquireSlot(&lock.Request{Path: uniqueKey(t), Slots: 3, Shared: true}); !errors.Is(err, hold.ErrInvalidOption) {
		t.Errorf("shared TryAcquireSlot = %v, want ErrInvalidOption", err)
	}

	for _, addr := range []string{
		"", "etcd://", "etcd://127.0.0.1:2379", "etcd://127.0.0.1:2379/", "etcd://127.0.0.1/locks/x",
		"etcd://127.0.0.1:99999/locks/x", "etcd://127.0.0.1:2379,/locks/x", "http://127.0.0.1:2379/locks/x",
		"etcd://user:secret@127.0.0.1:2379/locks/x", "etcd://127.0.0.1:2379/locks/x/", "etcd://127.0.0.1:2379/locks/x?a=b", "etcd://https://127.0.0.1:2379/locks/x",
	} {
		if _, _, err := etcd.ParseAddress(addr); err == nil {
			t.Errorf("ParseAddress(%q) accepted", addr)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseAddress error shows the password: %v", err)
		}
	}
	eps, key, err := etcd.ParseAddress("etcd://10.0.0.1:2379,[::1]:2379//locks/deploy%20x")
	if err != nil || len(eps) != 2 || eps[1] != "[::1]:2379" || key != "/locks/deploy x" {
		t.Errorf("ParseAddress = %v, %q, %v", eps, key, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ep := range []string{"127.0.0.1", "ftp://127.0.0.1:1", "127.0.0.1:0", ":2379"} {
		if _, err := etcd.Dial(ctx, etcd.Config{Endpoints: []string{ep}}); err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("Dial(%q) = %v, want a malformed-endpoint error", ep, err)
		}
	}
	if _, err := etcd.Dial(ctx, etcd.Config{}); err == nil {
		t.Error("Dial without endpoints accepted")
	}

	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	os.WriteFile(garbage, []byte("not a certificate"), 0o600)
	for _, cfg := range []etcd.Config{
		{CAFile: filepath.Join(dir, "missing.pem")},
		{CAFile: garbage},
		{CertFile: garbage},
		{CertFile: garbage, KeyFile: garbage},
	} {
		cfg.Endpoints = []string{testEndpoint}
		if _, err := etcd.Dial(ctx, cfg); err == nil {
			t.Errorf("Dial with TLS files %+v accepted", cfg)
		} else if _, ok := err.(*hold.Error); !ok {
			t.Errorf("TLS error %T %v is not a *hold.Error", err, err)
		}
	}
}

// TestUnreachable: a dead endpoint fails Dial fast with ErrUnreachable and
// the reason, and a Protocol whose cluster is gone fails operations within
// its request timeout rather than hanging (a wait, within its context).
func TestUnreachable(t *testing.T) {
	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dead := "127.0.0.1:" + strconv.Itoa(port)
	start := time.Now()
	_, err = etcd.Dial(context.Background(), etcd.Config{Endpoints: []string{dead}, DialTimeout: time.Second})
	if !errors.Is(err, etcd.ErrUnreachable) {
		t.Fatalf("Dial(%s) = %v, want ErrUnreachable", dead, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Dial of a dead endpoint took %s", d)
	}
	if !strings.Contains(err.Error(), "refused") {
		t.Errorf("Dial error does not say why: %v", err)
	}
	t.Logf("Dial error: %v", err)

	c, err := clientv3.New(clientv3.Config{Endpoints: []string{dead}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := etcd.New(c, etcd.WithRequestTimeout(500*time.Millisecond))
	start = time.Now()
	_, err = hold.TryAcquire("", lockOpts(p, "locks/x")...)
	if !errors.Is(err, etcd.ErrUnreachable) {
		t.Errorf("TryAcquire on a dead cluster = %v, want ErrUnreachable", err)
	}
	// A waiter rides out an outage until its context ends, and then
	// says etcd was unreachable.
	actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err = hold.Acquire(actx, "", lockOpts(p, "locks/x")...)
	if !errors.Is(err, hold.ErrTimeout) || !strings.Contains(err.Error(), "unreachable") {
		t.Errorf("Acquire on a dead cluster = %v, want ErrTimeout saying etcd is unreachable", err)
	}
	if _, err := hold.Inspect("", lockOpts(p, "locks/x")...); !errors.Is(err, etcd.ErrUnreachable) {
		t.Errorf("Inspect on a dead cluster = %v, want ErrUnreachable", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("three operations on a dead cluster took %s", d)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("the wait on a dead cluster ended after %s, before its context", d)
	}
}

// TestUpdateAndAppendOnEtcd: the guarded file helpers work with the lock
// on etcd, here from several goroutines with their own connections.
func TestUpdateAndAppendOnEtcd(t *testing.T) {
	key := uniqueKey(t)
	file := filepath.Join(t.TempDir(), "count")
	log := file + ".log"
	const writers, each = 4, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := lockOpts(dial(t), key)
			for i := 0; i < each; i++ {
				err := hold.Update(context.Background(), file, func(old []byte) ([]byte, error) {
					n, _ := strconv.Atoi(strings.TrimSpace(string(old)))
					return []byte(strconv.Itoa(n + 1)), nil
				}, opts...)
				if err == nil {
					err = hold.Append(context.Background(), log, []byte("x\n"), opts...)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(writers*each) {
		t.Errorf("count = %s, want %d", got, writers*each)
	}
	b, err = os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "x\n"); n != writers*each {
		t.Errorf("%d appended lines, want %d", n, writers*each)
	}
}

// hold.Named with etcd names a key in the cluster's own namespace, the same
// for every client, not a path in this machine's lock directory; an invalid
// name is refused before etcd is asked.
func TestNamedLock(t *testing.T) {
	p, q := dial(t), dial(t)
	name := fmt.Sprintf("deploy-%d", time.Now().UnixNano())
	l, err := hold.TryAcquire("", hold.WithProtocol(p), hold.Named(name))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if want := "hold/locks/" + name; l.Path() != want {
		t.Errorf("Path() = %q, want %q", l.Path(), want)
	}
	if _, err := hold.TryAcquire("", hold.WithProtocol(q), hold.Named(name)); !errors.Is(err, hold.ErrBusy) {
		t.Errorf("second client, same name: %v, want ErrBusy", err)
	}
	if _, err := hold.TryAcquire("", hold.WithProtocol(q), hold.Named("Bad/Name")); !errors.Is(err, hold.ErrInvalidName) {
		t.Errorf("invalid name: %v, want ErrInvalidName", err)
	}
}
