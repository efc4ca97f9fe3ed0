package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hold-dev/hold"
)

// TestLocksShareOneLease: the locks one Protocol takes share one lease,
// each with its own key and token; two acquisitions of one lock in one
// process still exclude each other; and one lock's loss is that lock's
// alone.
func TestLocksShareOneLease(t *testing.T) {
	p := dial(t)
	c := rawClient(t)
	base := uniqueKey(t)
	const n = 12
	locks := make([]*hold.Lock, n)
	keys := make([]string, n)
	var lease int64
	tokens := map[uint64]bool{}
	for i := range locks {
		keys[i] = fmt.Sprintf("%s/%d", base, i)
		locks[i] = mustAcquire(t, p, keys[i])
		locks[i].Lost() // watch every lock
		kv := holderKV(t, c, keys[i]).Kvs[0]
		if i == 0 {
			lease = kv.Lease
		} else if kv.Lease != lease {
			t.Fatalf("lock %d has lease %x, lock 0 has %x: want one lease per process", i, kv.Lease, lease)
		}
		if tokens[locks[i].Token()] {
			t.Fatalf("lock %d has the token of another lock: %d", i, locks[i].Token())
		}
		tokens[locks[i].Token()] = true
	}
	if _, err := hold.TryAcquire("", lockOpts(p, keys[0])...); !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("second acquisition of a held lock in the same process = %v, want ErrBusy", err)
	}
	if _, err := hold.Acquire(ctxTimeout(t, 300*time.Millisecond), "", lockOpts(p, keys[0])...); !errors.Is(err, hold.ErrTimeout) {
		t.Fatalf("second Acquire of a held lock in the same process = %v, want ErrTimeout", err)
	}

	// Delete one lock's key: that lock is lost, the others are not.
	if _, err := c.Delete(context.Background(), keys[3]+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, locks[3].Lost(), "Lost of the lock whose key was deleted")
	time.Sleep(100 * time.Millisecond) // time for a wrong signal to arrive
	for i, l := range locks {
		if i == 3 {
			continue
		}
		select {
		case <-l.Lost():
			t.Fatalf("lock %d lost when only lock 3's key was deleted", i)
		default:
		}
		if err := l.Check(); err != nil {
			t.Fatalf("lock %d after lock 3 was lost: %v", i, err)
		}
	}
	for i, l := range locks {
		err := l.Release()
		if i == 3 && !errors.Is(err, hold.ErrLost) {
			t.Errorf("Release of the lost lock = %v, want ErrLost", err)
		} else if i != 3 && err != nil {
			t.Errorf("Release of lock %d: %v", i, err)
		}
	}
	// The lease outlives its locks, for the next ones.
	l := mustAcquire(t, p, keys[0])
	defer l.Release()
	if kv := holderKV(t, c, keys[0]).Kvs[0]; kv.Lease != lease {
		t.Errorf("a later lock has lease %x, want the process's lease %x", kv.Lease, lease)
	}
}

// TestLeaseLossFiresEveryLock: when the shared lease ends (revoked from
// another client), every lock on it is lost, and the next acquisition gets
// a new lease.
func TestLeaseLossFiresEveryLock(t *testing.T) {
	p := dial(t)
	c := rawClient(t)
	base := uniqueKey(t)
	const n = 5
	locks := make([]*hold.Lock, n)
	for i := range locks {
		locks[i] = mustAcquire(t, p, fmt.Sprintf("%s/%d", base, i))
		locks[i].Lost()
	}
	lease := holderKV(t, c, base+"/0").Kvs[0].Lease
	if _, err := c.Revoke(context.Background(), clientv3.LeaseID(lease)); err != nil {
		t.Fatal(err)
	}
	for i, l := range locks {
		waitClosed(t, l.Lost(), fmt.Sprintf("Lost of lock %d after its lease was revoked", i))
		if err := l.Release(); !errors.Is(err, hold.ErrLost) {
			t.Errorf("Release of lock %d = %v, want ErrLost", i, err)
		}
	}
	l := mustAcquire(t, p, base+"/0")
	defer l.Release()
	if kv := holderKV(t, c, base+"/0").Kvs[0]; kv.Lease == lease {
		t.Errorf("an acquisition after the lease ended reuses the revoked lease %x", lease)
	}
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
