package etcd_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/etcd"
	"github.com/hold-dev/hold/etcd/etcdtest"
	"github.com/hold-dev/hold/internal/cycletest"
)

// Deadlocks between processes on etcd (etcd/waits.go and
// internal/deadlock/remote.go): workers that take etcd locks in opposite orders.

func init() {
	workers = append(workers, func() (int, bool) {
		return cycletest.RunWorker(func() (hold.Protocol, func(), error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := etcd.Dial(ctx, etcd.Config{Endpoints: []string{os.Getenv(endpointEnv)}})
			if err != nil {
				return nil, nil, err
			}
			return p, func() { p.Close() }, nil
		})
	})
}

// TestDeadlockCycle: two- and three-process cycles end with exactly one
// ErrDeadlock naming them; the others get their locks.
func TestDeadlockCycle(t *testing.T) {
	cycletest.Cycles(t, func(t *testing.T) string { return uniqueKey(t) }, endpointEnv+"="+testEndpoint)
}

// TestDeadlockGlobalOrder: workers that take random locks in one order,
// with waits longer than DeadlockAfter, never report a deadlock.
func TestDeadlockGlobalOrder(t *testing.T) {
	cycletest.GlobalOrder(t, uniqueKey(t), endpointEnv+"="+testEndpoint)
}

// TestDeadlockPlantedByOtherUser: on a cluster with auth, another etcd
// user who may take the same locks makes a wait that would close a cycle
// (a key holding the lock this process waits for, a key waiting for the
// lock this process holds, both on its lease) and says so in a wait
// entry: in its own prefix, and, refused, in this user's. The wait never
// reports a deadlock; the same keys and entry made by this user do.
func TestDeadlockPlantedByOtherUser(t *testing.T) {
	dir := t.TempDir()
	srv, err := etcdtest.Start(dir, etcdtest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	eps := srv.Endpoints()
	admin := rawClient(t, eps...)
	ctx := context.Background()
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { return addUser(ctx, admin, "alice") },
		func() error { return addUser(ctx, admin, "mallory") },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	alice := dialAs(t, eps, "alice")
	base := "locks/planted-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, c := range []struct {
		by      string
		planted bool // by another user: no report
	}{{"mallory", true}, {"alice", false}} {
		t.Run(c.by, func(t *testing.T) {
			l1, l2 := base+"-"+c.by+"-1", base+"-"+c.by+"-2"
			cycletest.WaitPlanted(t, alice, l1, l2, func() { plantWait(t, userClient(t, eps, c.by), l2, l1) }, !c.planted)
		})
	}
}

// addUser makes an etcd user that may use the locks under "locks/" and
// write its own wait entries only.
func addUser(ctx context.Context, c *clientv3.Client, name string) error {
	role := "r-" + name
	waits := "hold/waits/user:" + name + "/"
	for _, step := range []func() error{
		func() error { _, err := c.UserAdd(ctx, name, name+"pw"); return err },
		func() error { _, err := c.RoleAdd(ctx, role); return err },
		func() error {
			_, err := c.RoleGrantPermission(ctx, role, "locks/", clientv3.GetPrefixRangeEnd("locks/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error {
			_, err := c.RoleGrantPermission(ctx, role, waits, clientv3.GetPrefixRangeEnd(waits), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := c.UserGrantRole(ctx, name, role); return err },
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// dialAs connects a Protocol as user name of addUser.
func dialAs(t *testing.T, eps []string, name string) *etcd.Protocol {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := etcd.Config{Endpoints: eps, DialTimeout: 30 * time.Second}
	if name != "" {
		cfg.Username, cfg.Password = name, name+"pw"
	}
	p, err := etcd.Dial(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// userClient is a plain client of user name of addUser.
func userClient(t *testing.T, eps []string, name string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 30 * time.Second, Logger: zap.NewNop(),
		Username: name, Password: name + "pw"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// plantWait makes, on a lease of c's, a key that holds lock holds and one
// that waits for lock waits (behind its holder), laid out as hold's, and
// a wait entry for the latter, keeping the former, in the prefix of each
// of the two users (only c's own may be written).
func plantWait(t *testing.T, c *clientv3.Client, holds, waits string) {
	t.Helper()
	ctx := context.Background()
	lease, err := c.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Revoke(context.Background(), lease.ID) })
	record := `{"pid":1,"host":"elsewhere","started_at":"2026-01-01T00:00:00Z","released":false,"protocol":"etcd"}` + "\n"
	var heldRev int64
	for _, prefix := range []string{holds, waits} {
		put, err := c.Put(ctx, fmt.Sprintf("%s/%x-0", prefix, int64(lease.ID)), record, clientv3.WithLease(lease.ID))
		if err != nil {
			t.Fatal(err)
		}
		if prefix == holds {
			heldRev = put.Header.Revision
		}
	}
	key := fmt.Sprintf("%s/%x-0", waits, int64(lease.ID))
	kv, err := c.Get(ctx, key)
	if err != nil || len(kv.Kvs) != 1 {
		t.Fatalf("the planted waiting key: %v %v", kv, err)
	}
	entry := fmt.Sprintf(`{"key":%q,"rev":%d,"keeps":["%s/%x-0@%d"]}`, key, kv.Kvs[0].CreateRevision, holds, int64(lease.ID), heldRev)
	for _, user := range []string{"alice", "mallory"} {
		name := fmt.Sprintf("hold/waits/user:%s/%x-%x", user, int64(lease.ID), kv.Kvs[0].CreateRevision)
		if _, err := c.Put(ctx, name, entry, clientv3.WithLease(lease.ID)); err != nil {
			t.Logf("planting %s: %v", name, err)
		}
	}
}

// TestDeadlockReaderBehindWriter: a cycle through a reader queued behind
// a waiting writer (the reader waits for the writer, which waits for the
// first reader) ends with exactly one ErrDeadlock. Before readers had
// that edge, the chain ended at the queued reader and all three hung.
func TestDeadlockReaderBehindWriter(t *testing.T) {
	cycletest.ReaderBehindWriter(t, uniqueKey(t), endpointEnv+"="+testEndpoint)
}

// TestDeadlockBoundedLink: a two-process cycle whose one wait has a
// deadline is no deadlock: that wait times out, the other gets its lock,
// and nobody reports one.
func TestDeadlockBoundedLink(t *testing.T) {
	cycletest.BoundedLink(t, uniqueKey(t), endpointEnv+"="+testEndpoint)
}

// TestDeadlockManyWaits: with more wait entries of the same etcd user
// than one page reads (here 130 unrelated waits, each a key waiting
// behind a holder on its own lock), a true two-process cycle is still
// reported. Before, more than 100 entries turned the search off.
func TestDeadlockManyWaits(t *testing.T) {
	c := rawClient(t, testEndpoint)
	ctx := context.Background()
	lease, err := c.Grant(ctx, 120)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Revoke(context.Background(), lease.ID) })
	base := uniqueKey(t)
	record := `{"pid":1,"host":"elsewhere","started_at":"2026-01-01T00:00:00Z","released":false,"protocol":"etcd"}` + "\n"
	for i := range 130 {
		l := fmt.Sprintf("%s-other%d", base, i)
		// A holder and a waiter on the one lease: two keys, the second
		// waiting behind the first.
		if _, err := c.Put(ctx, fmt.Sprintf("%s/%x-0", l, int64(lease.ID)), record, clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
		w := fmt.Sprintf("%s/%x-1", l, int64(lease.ID))
		put, err := c.Put(ctx, w, record, clientv3.WithLease(lease.ID))
		if err != nil {
			t.Fatal(err)
		}
		entry := fmt.Sprintf(`{"key":%q,"rev":%d}`, w, put.Header.Revision)
		if _, err := c.Put(ctx, fmt.Sprintf("hold/waits/user:/%x-%x", int64(lease.ID), put.Header.Revision), entry, clientv3.WithLease(lease.ID)); err != nil {
			t.Fatal(err)
		}
	}
	p := dialAs(t, []string{testEndpoint}, "")
	ws, err := p.ServerWaits(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) < 130 {
		t.Fatalf("ServerWaits lists %d waits, want the 130 planted", len(ws))
	}
	res, took := cycletest.Cycle(t, [][]string{{base + "-l0", base + "-l1"}, {base + "-l1", base + "-l0"}}, 200*time.Millisecond, endpointEnv+"="+testEndpoint)
	t.Logf("the cycle among 130 other waits ended in %v", took)
	cycletest.CheckOneDeadlock(t, res, []string{base + "-l0", base + "-l1"})
}

// TestDeadlockRandom: random near rings (one wait with a deadline, or a
// holder that lets go) are never reported, and random true rings of 2 to
// 4 processes are, once each (cycletest.Random; HOLD_TEST_LONG=1 for 200
// and 50).
func TestDeadlockRandom(t *testing.T) {
	near, true_ := cycletest.RandomCounts(6, 4)
	cycletest.Random(t, uniqueKey(t), near, true_, endpointEnv+"="+testEndpoint)
}
