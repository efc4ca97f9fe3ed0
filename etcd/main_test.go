package etcd_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/etcd"
	"github.com/hold-dev/hold/etcd/etcdtest"
	"github.com/hold-dev/hold/holdtest"
	"github.com/hold-dev/hold/internal/testenv"
)

// testEndpoint is the client URL of the etcd server every test shares. It
// is set once by TestMain before any test runs.
var testEndpoint string

// workers are the roles of worker processes that tests of some systems
// add (see semaphore_linux_test.go): each runs this process as its worker
// if a test started it as one.
var workers []func() (code int, ok bool)

func TestMain(m *testing.M) {
	if code, ok := holdtest.RunWorker(etcdSubject); ok {
		os.Exit(code)
	}
	for _, w := range workers {
		if code, ok := w(); ok {
			os.Exit(code)
		}
	}
	dir, err := os.MkdirTemp("", "hold-etcd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err := etcdtest.Start(dir, etcdtest.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting embedded etcd:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	testEndpoint = srv.Members[0].ClientURL
	code := testenv.Run(m)
	srv.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// dial connects a Protocol to the shared server.
func dial(t testing.TB, opts ...etcd.Option) *etcd.Protocol {
	t.Helper()
	return dialTo(t, []string{testEndpoint}, opts...)
}

func dialTo(t testing.TB, eps []string, opts ...etcd.Option) *etcd.Protocol {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := etcd.Dial(ctx, etcd.Config{Endpoints: eps}, opts...)
	if err != nil {
		t.Fatalf("Dial(%v): %v", eps, err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// rawClient is a plain etcd client for inspecting and sabotaging locks.
func rawClient(t testing.TB, eps ...string) *clientv3.Client {
	t.Helper()
	if len(eps) == 0 {
		eps = []string{testEndpoint}
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// uniqueKey returns a lock key no other test uses.
func uniqueKey(t testing.TB) string { return testenv.UniqueName(t, "hold-test/") }

// lockOpts are the hold options that take key through p.
func lockOpts(p *etcd.Protocol, key string) []hold.Option {
	return []hold.Option{hold.WithProtocol(p), hold.LockFile(key)}
}
