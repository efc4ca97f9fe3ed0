package etcd_test

import (
	"context"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/etcd"
	"github.com/hold-dev/hold/holdtest"
	"github.com/hold-dev/hold/internal/testenv"
)

// endpointEnv tells the conformance suite's workers where the test's etcd
// server is.
const endpointEnv = "HOLD_ETCD_TEST_ENDPOINT"

// conformanceTTL is the lease TTL of the conformance subject: a killed
// holder's lock is free once its lease expires.
const conformanceTTL = 3 * time.Second

var etcdSubject = holdtest.Subject{
	Name: "etcd",
	Options: func() ([]hold.Option, func(), error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := etcd.Dial(ctx, etcd.Config{Endpoints: []string{os.Getenv(endpointEnv)}}, etcd.WithTTL(conformanceTTL))
		if err != nil {
			return nil, nil, err
		}
		return []hold.Option{hold.WithProtocol(p)}, func() { p.Close() }, nil
	},
	Target: func(t *testing.T) string { return testenv.UniqueName(t, "conformance/") },
	// Readers have keys of their own (see keys.go).
	Shared: true,
	// Waiters of one key queue on its revisions: that queue is what is
	// pressed.
	Workers:    8,
	Increments: 100,
	CrashFree:  conformanceTTL,
	Lose: func(t *testing.T, l *hold.Lock) {
		c := rawClient(t)
		if _, err := c.Delete(context.Background(), l.Path()+"/", clientv3.WithPrefix()); err != nil {
			t.Fatal(err)
		}
	},
}

func TestConformanceEtcd(t *testing.T) {
	t.Setenv(endpointEnv, testEndpoint)
	s := etcdSubject
	s.Env = []string{endpointEnv + "=" + testEndpoint}
	holdtest.Run(t, s)
}

// TestSemaphoreEtcd runs holdtest's semaphore checks on etcd. A killed
// holder's place stays taken until its lease runs out, so the stress kills
// fewer holders than elsewhere unless HOLD_TEST_SLOT_KILLS says otherwise.
func TestSemaphoreEtcd(t *testing.T) {
	t.Setenv(endpointEnv, testEndpoint)
	if os.Getenv("HOLD_TEST_SLOT_KILLS") == "" {
		t.Setenv("HOLD_TEST_SLOT_KILLS", "40")
	}
	s := etcdSubject
	s.Env = []string{endpointEnv + "=" + testEndpoint}
	holdtest.RunSemaphore(t, s)
}
