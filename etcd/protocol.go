package etcd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/hold-dev/hold/lock"
)

// The capabilities hold finds in an etcd protocol.
var (
	_ lock.Breaker = (*Protocol)(nil)
	_ lock.Namer   = (*Protocol)(nil)
	_ lock.Lister  = (*Protocol)(nil)
	_ lock.Closer  = (*Protocol)(nil)
)

// Defaults.
const (
	// DefaultTTL is the TTL of the lease a Protocol's locks share. It bounds how long a
	// crashed holder keeps others waiting, and is how long a holder may be
	// paused or cut off before it loses the lock.
	DefaultTTL = 15 * time.Second
	// DefaultRequestTimeout bounds one round trip to etcd. It is how fast an
	// unreachable cluster is reported by operations that take no context
	// (TryAcquire, Inspect, Release, Check) and by each step of Acquire.
	DefaultRequestTimeout = 5 * time.Second
	// DefaultDialTimeout bounds Dial's wait for a first connection.
	DefaultDialTimeout = 5 * time.Second
)

// ErrUnreachable means no etcd endpoint answered in time. An *hold.Error
// wraps it, with the connection error etcd's client saw.
var ErrUnreachable = lock.Unavailable("etcd unreachable")

// Protocol is hold's lock protocol on etcd. Create it with Dial or New; it
// is safe for concurrent use. The locks taken through it share one lease,
// kept alive by one stream, while each has its own key, token and Lost
// signal. It is opaque: its settings are Config's and the options'.
type Protocol struct {
	client      *clientv3.Client
	ownsClient  bool
	certUser    string // the etcd user a client certificate names (waitsPrefix)
	ttl         time.Duration
	reqTimeout  time.Duration
	redactFlags []string
	notice      func(string) // see WithOutageNotice

	leaseMu sync.Mutex
	lease   *session // the lease every lock shares; nil until the first
	closed  bool     // Close was called: no lease is granted any more

	slotsMu sync.Mutex
	slots   map[string]map[uint64]bool // prefix -> slots in use (see takeSlot)
}

// An Option changes how a Protocol takes locks.
type Option func(*Protocol)

// WithTTL sets the TTL of the protocol's lease (default DefaultTTL). etcd
// counts leases in whole seconds, so d is rounded up to a second; the server
// may raise it to its own minimum.
func WithTTL(d time.Duration) Option {
	return func(p *Protocol) {
		if d > 0 {
			p.ttl = d
		}
	}
}

// WithRequestTimeout bounds each round trip to etcd (default
// DefaultRequestTimeout), so that an unreachable cluster gives an error
// instead of a hang even when the caller's context has no deadline.
func WithRequestTimeout(d time.Duration) Option {
	return func(p *Protocol) {
		if d > 0 {
			p.reqTimeout = d
		}
	}
}

// RedactFlags hides the values of these command-line flags (for example
// "--etcd-password") in the owner record a holder publishes: the record is
// readable by every client of the cluster, and the command line it carries
// must not leak a secret. Both "--flag value" and "--flag=value" are
// redacted.
func RedactFlags(flags ...string) Option {
	return func(p *Protocol) { p.redactFlags = append(p.redactFlags, flags...) }
}

// WithOutageNotice has f called, once per acquisition and outage, when a
// waiter finds etcd unreachable and keeps trying: a waiter rides out an
// outage, reconnecting with a growing pause, until its context ends, and
// f lets a front end say so (hold run prints it on stderr).
func WithOutageNotice(f func(msg string)) Option {
	return func(p *Protocol) { p.notice = f }
}

// New returns a Protocol that takes locks through client. The caller keeps
// ownership of client: Close does not close it.
func New(client *clientv3.Client, opts ...Option) *Protocol {
	p := &Protocol{client: client, ttl: DefaultTTL, reqTimeout: DefaultRequestTimeout}
	for _, o := range opts {
		if o != nil {
			o(p)
		}
	}
	return p
}

// Config says how Dial reaches the cluster.
type Config struct {
	// Endpoints are the cluster members: "host:port", "http://host:port"
	// or "https://host:port". At least one is required.
	Endpoints []string
	// Username and Password authenticate with etcd's auth, when both are
	// set.
	Username string
	Password string
	// CAFile, CertFile and KeyFile configure TLS: CAFile verifies the
	// server (the system roots are used when it is empty), CertFile and
	// KeyFile (both or neither) authenticate this client. Any of them, or
	// an https endpoint, turns TLS on.
	CAFile   string
	CertFile string
	KeyFile  string
	// TLS, when set, is used as is instead of the files.
	TLS *tls.Config
	// DialTimeout bounds the wait for a first connection (default
	// DefaultDialTimeout).
	DialTimeout time.Duration
	// Logger receives the etcd client's own log; nil means silence.
	Logger *zap.Logger
}

// Dial connects to the cluster and returns a Protocol that owns the
// connection; Close closes it. It fails fast, with an error wrapping
// ErrUnreachable, when no endpoint answers within the dial timeout or ctx,
// and with a clear error for a malformed endpoint or unusable TLS files.
func Dial(ctx context.Context, cfg Config, opts ...Option) (*Protocol, error) {
	eps, secure, err := checkEndpoints(cfg.Endpoints)
	if err != nil {
		return nil, err
	}
	tlsConf := cfg.TLS
	if tlsConf == nil && (secure || cfg.CAFile != "" || cfg.CertFile != "" || cfg.KeyFile != "") {
		if tlsConf, err = loadTLS(cfg.CAFile, cfg.CertFile, cfg.KeyFile); err != nil {
			return nil, err
		}
	}
	timeout := cfg.DialTimeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	logger := cfg.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: timeout,
		TLS:         tlsConf,
		Username:    cfg.Username,
		Password:    cfg.Password,
		Logger:      logger,
	})
	if err != nil {
		// With credentials, New authenticates at once, so an unreachable
		// cluster and a wrong password both surface here.
		if dctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
			return nil, &lock.Error{Op: "dial", Path: strings.Join(eps, ","), Err: fmt.Errorf("%w: %v", ErrUnreachable, err)}
		}
		return nil, &lock.Error{Op: "dial", Path: strings.Join(eps, ","), Err: err}
	}
	if err := waitReady(dctx, client); err != nil {
		client.Close()
		return nil, &lock.Error{Op: "dial", Path: strings.Join(eps, ","), Err: err,
			Hint: "check the endpoints, that etcd runs there, and the TLS settings"}
	}
	p := New(client, opts...)
	p.ownsClient = true
	if cfg.Username == "" {
		p.certUser = certUser(dctx, client, tlsConf)
	}
	return p, nil
}

// waitReady waits until the client's connection is up. etcd's client dials
// lazily and its calls wait for a connection until their context ends, so
// without this an unreachable endpoint would only show up as a timeout of
// the first lock operation.
func waitReady(ctx context.Context, client *clientv3.Client) error {
	conn := client.ActiveConnection()
	conn.Connect()
	for {
		s := conn.GetState()
		if s == connectivity.Ready {
			return nil
		}
		if !conn.WaitForStateChange(ctx, s) {
			return fmt.Errorf("%w: %s", ErrUnreachable, connectionProblem(client))
		}
	}
}

// connectionProblem describes why the client has no connection, for an
// error message: a call that does not wait for a connection reports the
// last dial error ("connection refused", a TLS handshake failure).
func connectionProblem(client *clientv3.Client) string {
	conn := client.ActiveConnection()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{}, grpc.WaitForReady(false))
	if err == nil {
		return "connection state " + conn.GetState().String()
	}
	return err.Error()
}

// Close revokes the lease of the protocol's locks, which ends every lock
// still held through it, and closes the client if Dial created it. An
// Acquire waiting meanwhile ends with an error saying the protocol was
// closed, and later ones fail the same way: no lease is granted after
// Close, so none outlives it.
func (p *Protocol) Close() error {
	p.leaseMu.Lock()
	s := p.lease
	p.lease, p.closed = nil, true
	p.leaseMu.Unlock()
	if s != nil {
		s.stop()
		p.revoke(s.id, p.reqTimeout)
	}
	if p.ownsClient {
		return p.client.Close()
	}
	return nil
}

// Client returns the etcd client the protocol uses.
func (p *Protocol) Client() *clientv3.Client { return p.client }

// TTL returns the TTL the protocol's lease asks for.
func (p *Protocol) TTL() time.Duration { return p.ttl }

// Name returns "etcd".
func (p *Protocol) Name() string { return "etcd" }

// NamedPath puts hold.Named locks under the key prefix "hold/locks/", so
// that a name means the same lock for every client of the cluster rather
// than a path in one machine's lock directory.
func (p *Protocol) NamedPath(name string) string { return "hold/locks/" + name }

// ttlSeconds is the lease TTL as etcd wants it: whole seconds, at least one.
func (p *Protocol) ttlSeconds() int64 {
	s := int64(math.Ceil(p.ttl.Seconds()))
	if s < 1 {
		s = 1
	}
	return s
}

// checkEndpoints validates endpoints and reports whether any asks for TLS.
func checkEndpoints(eps []string) (out []string, secure bool, err error) {
	if len(eps) == 0 {
		return nil, false, &lock.Error{Op: "dial", Path: "", Err: errors.New("no etcd endpoint given")}
	}
	for _, ep := range eps {
		hostport := ep
		if scheme, rest, ok := strings.Cut(ep, "://"); ok {
			switch scheme {
			case "https":
				secure = true
			case "http":
			default:
				return nil, false, badEndpoint(ep, fmt.Sprintf("unknown scheme %q (want http or https)", scheme))
			}
			hostport = rest
		}
		host, port, err := net.SplitHostPort(hostport)
		if err != nil {
			return nil, false, badEndpoint(ep, "want host:port")
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, false, badEndpoint(ep, fmt.Sprintf("bad port %q", port))
		}
		if host == "" || strings.ContainsAny(host, "/?#@ ") {
			return nil, false, badEndpoint(ep, fmt.Sprintf("bad host %q", host))
		}
		out = append(out, ep)
	}
	return out, secure, nil
}

func badEndpoint(ep, why string) error {
	return &lock.Error{Op: "dial", Path: ep, Err: fmt.Errorf("malformed etcd endpoint: %s", why)}
}

// loadTLS builds a TLS configuration from PEM files.
func loadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, &lock.Error{Op: "tls", Path: caFile, Err: err}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &lock.Error{Op: "tls", Path: caFile, Err: errors.New("no PEM certificate found in CA file")}
		}
		conf.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, &lock.Error{Op: "tls", Path: certFile + keyFile, Err: errors.New("a client certificate needs both the cert and the key file")}
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, &lock.Error{Op: "tls", Path: certFile, Err: err}
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

// ParseAddress splits a lock address "etcd://host:port[,host:port...]/key"
// into its endpoints and its key (the lock path). The key is the URL path
// without its leading slash: "etcd://h:2379/locks/deploy" names the key
// "locks/deploy" and "etcd://h:2379//locks/deploy" the key "/locks/deploy".
// TLS is configured apart from the address (Config's CA, cert and key).
// Credentials do not belong in an address, which shows up in process lists
// and in `hold status`: user info in it is an error, and the error does not
// repeat it.
func ParseAddress(addr string) (endpoints []string, key string, err error) {
	shown := addr
	if i := strings.Index(addr, "@"); i >= 0 {
		if j := strings.Index(addr, "://"); j >= 0 && j < i {
			shown = addr[:j+3] + "***" + addr[i:]
		} else {
			shown = "***" + addr[i:]
		}
	}
	bad := func(why string) error {
		return &lock.Error{Op: "parse", Path: shown, Err: fmt.Errorf("malformed etcd address: %s", why),
			Hint: "want etcd://host:port[,host:port...]/key/path"}
	}
	rest, ok := strings.CutPrefix(addr, "etcd://")
	if !ok {
		return nil, "", bad("it does not start with etcd://")
	}
	hosts, path, ok := strings.Cut(rest, "/")
	switch {
	case strings.Contains(hosts, "@"):
		return nil, "", bad("credentials in the address; pass them by flag or environment instead")
	case !ok || path == "":
		return nil, "", bad("no key after the endpoints")
	case strings.ContainsAny(path, "?#"):
		return nil, "", bad("query or fragment in the key")
	}
	key, err = url.PathUnescape(path)
	if err != nil {
		return nil, "", bad(err.Error())
	}
	endpoints = strings.Split(hosts, ",")
	if _, _, err := checkEndpoints(endpoints); err != nil {
		return nil, "", err
	}
	if err := checkKey(key); err != nil {
		return nil, "", err
	}
	return endpoints, key, nil
}

// maxKeyLen bounds a lock key. etcd accepts far longer keys; a lock name
// this long is a mistake.
const maxKeyLen = 512

// checkKey validates a lock key (prefix). It must be printable UTF-8 without
// control characters and must not end in "/": the waiters' keys are the
// prefix, a slash and a lease id.
func checkKey(key string) error {
	why := ""
	switch {
	case key == "":
		why = "empty key"
	case len(key) > maxKeyLen:
		why = fmt.Sprintf("longer than %d bytes", maxKeyLen)
	case !utf8.ValidString(key):
		why = "not valid UTF-8"
	case strings.HasSuffix(key, "/"):
		why = `ends in "/"`
	case strings.IndexFunc(key, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }) >= 0:
		why = "contains a control character"
	}
	if why == "" {
		return nil
	}
	return &lock.Error{Op: "acquire", Path: key, Err: lock.ErrInvalidName,
		Hint: "an etcd lock key is printable UTF-8 of at most 512 bytes, not ending in /: " + why}
}

// certUser returns the etcd user that a client authenticated by its
// certificate is: the certificate's common name, which etcd takes as the
// user name when auth is enabled and no password is given. "" without a
// client certificate, or when etcd says auth is off (every client is then
// the same user, and shares its wait entries).
func certUser(ctx context.Context, client *clientv3.Client, conf *tls.Config) string {
	if conf == nil || len(conf.Certificates) == 0 || len(conf.Certificates[0].Certificate) == 0 {
		return ""
	}
	cert := conf.Certificates[0].Leaf
	if cert == nil {
		c, err := x509.ParseCertificate(conf.Certificates[0].Certificate[0])
		if err != nil {
			return ""
		}
		cert = c
	}
	if st, err := client.AuthStatus(ctx); err == nil && !st.Enabled {
		return ""
	}
	return cert.Subject.CommonName
}
