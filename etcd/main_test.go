package etcd_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/etcd"
)

// workerEnv names the role a re-executed test binary plays.
const workerEnv = "HOLD_ETCD_TEST_WORKER"

// testEndpoint is the client URL of the etcd server every test shares. It
// is set once by TestMain before any test runs.
var testEndpoint string

func TestMain(m *testing.M) {
	if role := os.Getenv(workerEnv); role != "" {
		os.Exit(runWorker(role))
	}
	dir, err := os.MkdirTemp("", "hold-etcd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv, err := startCluster(dir, 1, fastTicks)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting embedded etcd:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	testEndpoint = srv.members[0].clientURL
	code := m.Run()
	srv.close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// ticks are a cluster's raft timing. Short ticks make leases and elections
// fast; a multi-member cluster on a loaded machine needs more slack.
type ticks struct{ tickMs, electionMs uint }

var (
	fastTicks    = ticks{10, 100}
	clusterTicks = ticks{25, 500}
)

// member is one embedded etcd server.
type member struct {
	name      string
	dir       string
	clientURL string
	peerURL   string
	cluster   string // the initial-cluster string
	token     string
	ticks     ticks
	e         *embed.Etcd
	closed    chan struct{} // closed when the last stop has finished
}

type cluster struct{ members []*member }

// freePort returns a port nobody listens on right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startCluster starts n members on 127.0.0.1 with fsync off, and waits
// until they serve.
func startCluster(dir string, n int, t ticks) (*cluster, error) {
	c := &cluster{}
	var initial []string
	token := filepath.Base(dir)
	for i := 0; i < n; i++ {
		cp, err := freePort()
		if err != nil {
			return nil, err
		}
		pp, err := freePort()
		if err != nil {
			return nil, err
		}
		m := &member{
			name:      "m" + strconv.Itoa(i),
			dir:       filepath.Join(dir, "m"+strconv.Itoa(i)),
			clientURL: fmt.Sprintf("http://127.0.0.1:%d", cp),
			peerURL:   fmt.Sprintf("http://127.0.0.1:%d", pp),
			token:     token,
			ticks:     t,
		}
		initial = append(initial, m.name+"="+m.peerURL)
		c.members = append(c.members, m)
	}
	for _, m := range c.members {
		m.cluster = strings.Join(initial, ",")
	}
	errc := make(chan error, n)
	for _, m := range c.members {
		go func() { errc <- m.start() }()
	}
	var first error
	for range c.members {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		c.close()
		return nil, first
	}
	return c, nil
}

// start starts (or restarts, on its existing data) the member and waits
// until it serves clients.
func (m *member) start() error {
	if m.closed != nil {
		<-m.closed // the data directory and ports are free again
	}
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cu, _ := url.Parse(m.clientURL)
	pu, _ := url.Parse(m.peerURL)
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = m.cluster
	cfg.InitialClusterToken = m.token
	cfg.TickMs = m.ticks.tickMs
	cfg.ElectionMs = m.ticks.electionMs
	cfg.UnsafeNoFsync = true
	cfg.LogLevel = "error"
	// Closing a member logs errors about its listeners; keep them out of
	// the test output.
	cfg.LogOutputs = []string{filepath.Join(filepath.Dir(m.dir), m.name+".log")}
	cfg.Logger = "zap"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return err
	case <-time.After(60 * time.Second):
		e.Close()
		return fmt.Errorf("etcd member %s not ready after 60s", m.name)
	}
	m.e = e
	return nil
}

// stop kills the member the way a crash would: raft stops at once, and
// the graceful close (which waits up to etcd's request timeout for open
// client streams) finishes in the background.
func (m *member) stop() {
	if m.e == nil {
		return
	}
	e := m.e
	m.e = nil
	e.Server.HardStop()
	closed := make(chan struct{})
	m.closed = closed
	go func() {
		e.Close()
		close(closed)
	}()
}

func (c *cluster) close() {
	for _, m := range c.members {
		m.stop()
	}
	for _, m := range c.members {
		if m.closed != nil {
			<-m.closed
		}
	}
}

func (c *cluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL)
	}
	return eps
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
func uniqueKey(t testing.TB) string {
	return "hold-test/" + strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// lockOpts are the hold options that take key through p.
func lockOpts(p *etcd.Protocol, key string) []hold.Option {
	return []hold.Option{hold.WithProtocol(p), hold.LockFile(key)}
}
