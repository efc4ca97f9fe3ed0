// Package etcdtest runs a real etcd cluster inside a test process, on
// 127.0.0.1 with free ports, for tests of code that takes locks on etcd.
//
// The servers use fast raft ticks and no fsync: they start in a fraction of
// a second and are not durable across a machine crash, which a test does
// not need. Importing this package links the etcd server; only tests
// should.
package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// Config shapes a test cluster.
type Config struct {
	// Members is the number of members (default 1).
	Members int
	// TickMs and ElectionMs are raft's heartbeat and election timeouts
	// (default 10 and 100 for one member, 25 and 500 for more, which a
	// loaded machine needs to keep a stable leader). Leases cannot be
	// shorter than 1.5 election timeouts.
	TickMs, ElectionMs uint
	// StartTimeout bounds the wait for the cluster to serve (default 60s).
	StartTimeout time.Duration
	// ClientTLS, when set, makes the members serve clients over TLS with
	// these PEM files (ClientURL is then https), and ask every client for
	// a certificate that CAFile signed: with auth enabled, etcd takes a
	// certificate's common name as its user.
	ClientTLS *TLSFiles
}

// TLSFiles are a server's certificate and key and the CA that signs the
// clients' certificates.
type TLSFiles struct{ CertFile, KeyFile, CAFile string }

// Cluster is a running test cluster.
type Cluster struct {
	Members []*Member
}

// Member is one etcd server of a Cluster.
type Member struct {
	// Name is the member's name, "m0", "m1", ...
	Name string
	// ClientURL is where clients reach it: "http://127.0.0.1:PORT".
	ClientURL string

	dir, peerURL, initial, token string
	tickMs, electionMs           uint
	clientTLS                    *TLSFiles
	startTimeout                 time.Duration
	e                            *embed.Etcd
	closed                       chan struct{}
}

// Start starts a cluster whose data lives under dir, and waits until every
// member serves clients.
func Start(dir string, cfg Config) (*Cluster, error) {
	if cfg.Members <= 0 {
		cfg.Members = 1
	}
	if cfg.TickMs == 0 || cfg.ElectionMs == 0 {
		cfg.TickMs, cfg.ElectionMs = 10, 100
		if cfg.Members > 1 {
			cfg.TickMs, cfg.ElectionMs = 25, 500
		}
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	c := &Cluster{}
	var initial []string
	scheme := "http"
	if cfg.ClientTLS != nil {
		scheme = "https"
	}
	for i := 0; i < cfg.Members; i++ {
		cp, err := FreePort()
		if err != nil {
			return nil, err
		}
		pp, err := FreePort()
		if err != nil {
			return nil, err
		}
		m := &Member{
			Name:         "m" + strconv.Itoa(i),
			ClientURL:    fmt.Sprintf("%s://127.0.0.1:%d", scheme, cp),
			clientTLS:    cfg.ClientTLS,
			dir:          filepath.Join(dir, "m"+strconv.Itoa(i)),
			peerURL:      fmt.Sprintf("http://127.0.0.1:%d", pp),
			token:        "hold-test-" + strconv.FormatInt(time.Now().UnixNano(), 36),
			tickMs:       cfg.TickMs,
			electionMs:   cfg.ElectionMs,
			startTimeout: cfg.StartTimeout,
		}
		initial = append(initial, m.Name+"="+m.peerURL)
		c.Members = append(c.Members, m)
	}
	for _, m := range c.Members {
		m.initial = strings.Join(initial, ",")
		m.token = c.Members[0].token
	}
	// Members of a new cluster wait for each other: start them together.
	errc := make(chan error, len(c.Members))
	for _, m := range c.Members {
		go func() { errc <- m.Start() }()
	}
	var first error
	for range c.Members {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		c.Close()
		return nil, first
	}
	return c, nil
}

// FreePort returns a port on 127.0.0.1 that nobody listens on right now,
// for a server to start on (or for a test that needs a dead endpoint).
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Endpoints returns the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// Leader returns the member that leads, or nil.
func (c *Cluster) Leader() *Member {
	for _, m := range c.Members {
		if m.e != nil && m.e.Server.Leader() == m.e.Server.MemberID() {
			return m
		}
	}
	return nil
}

// Close stops every member and waits until they are gone.
func (c *Cluster) Close() {
	for _, m := range c.Members {
		m.Stop()
	}
	for _, m := range c.Members {
		m.wait()
	}
}

// Start starts the member, or restarts it on its existing data after Stop
// (same name, ports and data), and waits until it serves clients.
func (m *Member) Start() error {
	m.wait() // the data directory and the ports are free again
	cfg := embed.NewConfig()
	cfg.Name = m.Name
	cfg.Dir = m.dir
	cu, err := url.Parse(m.ClientURL)
	if err != nil {
		return err
	}
	pu, err := url.Parse(m.peerURL)
	if err != nil {
		return err
	}
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	if t := m.clientTLS; t != nil {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: t.CertFile, KeyFile: t.KeyFile, TrustedCAFile: t.CAFile, ClientCertAuth: true}
	}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = m.initial
	cfg.InitialClusterToken = m.token
	cfg.TickMs = m.tickMs
	cfg.ElectionMs = m.electionMs
	cfg.UnsafeNoFsync = true
	// Passwords of test users need no strength: bcrypt's least cost (4)
	// keeps a test that enables auth from spending seconds per login
	// under the race detector.
	cfg.BcryptCost = 4
	cfg.LogLevel = "error"
	// Stopping a member logs errors about its closed listeners: keep them
	// out of the test output, in a file beside the data.
	cfg.LogOutputs = []string{m.dir + ".log"}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return err
	case <-time.After(m.startTimeout):
		e.Close()
		return fmt.Errorf("etcd member %s not ready after %s", m.Name, m.startTimeout)
	}
	m.e = e
	return nil
}

// Stop kills the member the way a crash would: raft stops at once, and
// the graceful close of its client connections (which waits up to etcd's
// request timeout for open watch streams) finishes in the background.
// Start waits for it.
func (m *Member) Stop() {
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

func (m *Member) wait() {
	if m.closed != nil {
		<-m.closed
	}
}
