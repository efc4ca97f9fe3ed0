package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"

	"github.com/hold-dev/hold/internal/redact"
	"github.com/hold-dev/hold/lock"
)

// The capabilities hold finds in a PostgreSQL protocol.
var (
	_ lock.Breaker = (*Protocol)(nil)
	_ lock.Namer   = (*Protocol)(nil)
	_ lock.Lister  = (*Protocol)(nil)
	_ lock.Closer  = (*Protocol)(nil)
)

// Defaults.
const (
	// DefaultRequestTimeout bounds one round trip that takes no context
	// (TryAcquire, Inspect, Release, Check), so that a server that stopped
	// answering gives an error instead of a hang.
	DefaultRequestTimeout = 5 * time.Second
	// DefaultDialTimeout bounds a connection attempt when the connection
	// string sets no connect_timeout.
	DefaultDialTimeout = 5 * time.Second
	// DefaultMaxIdle is how many idle connections a Protocol keeps for
	// later acquisitions.
	DefaultMaxIdle = 8
)

// ErrUnreachable means the server could not be reached or stopped
// answering. An *hold.Error wraps it, with the driver's error.
var ErrUnreachable = lock.Unavailable("PostgreSQL unreachable")

// Protocol is hold's lock protocol on PostgreSQL. Create it with Dial or
// New; it is safe for concurrent use. Every held lock has a connection
// (a database session) of its own; released locks leave their connection
// idle for the next acquisition. It is opaque: its settings are the
// connection string's and the options'.
type Protocol struct {
	cfg        *pgx.ConnConfig
	reqTimeout time.Duration
	maxIdle    int
	// sessionTimeout and bounds: see bounds.go. cfgErr is a bad setting
	// in the connection string, reported by the first connection.
	sessionTimeout time.Duration
	bounds         serverBounds
	cfgErr         error
	notice         func(string) // see WithOutageNotice

	mu     sync.Mutex
	idle   []*conn
	closed bool
}

// An Option changes how a Protocol takes locks.
type Option func(*Protocol)

// WithRequestTimeout bounds each round trip that has no context of its own
// (default DefaultRequestTimeout).
func WithRequestTimeout(d time.Duration) Option {
	return func(p *Protocol) {
		if d > 0 {
			p.reqTimeout = d
		}
	}
}

// WithMaxIdle sets how many idle connections the protocol keeps (default
// DefaultMaxIdle); 0 closes each connection when its lock is released.
func WithMaxIdle(n int) Option {
	return func(p *Protocol) {
		if n >= 0 {
			p.maxIdle = n
		}
	}
}

// WithOutageNotice has f called, once per acquisition and outage, when a
// waiter finds the server unreachable (or restarting) and keeps trying: a
// waiter reconnects, with a growing pause, until its context ends, and f
// lets a front end say so (hold run prints it on stderr).
func WithOutageNotice(f func(msg string)) Option {
	return func(p *Protocol) { p.notice = f }
}

// New returns a Protocol that connects with cfg, which it copies. It does
// not connect before the first acquisition; Dial does. libpq's socket
// keywords (keepalives, keepalives_idle, keepalives_interval,
// keepalives_count, tcp_user_timeout) among cfg's runtime parameters set
// up the client's socket instead of being sent to the server, and the
// session gets the server-side bounds of WithSessionTimeout and the
// settings hold fixes for its sessions (lock_timeout, statement_timeout,
// idle_in_transaction_session_timeout, default_transaction_isolation,
// synchronous_commit: docs/postgres.md says why); a bad value among them,
// or one of the fixed settings with another value, fails the first
// connection.
func New(cfg *pgx.ConnConfig, opts ...Option) *Protocol {
	p := &Protocol{cfg: cfg.Copy(), reqTimeout: DefaultRequestTimeout, maxIdle: DefaultMaxIdle,
		sessionTimeout: DefaultSessionTimeout}
	if p.cfg.ConnectTimeout <= 0 {
		p.cfg.ConnectTimeout = DefaultDialTimeout
	}
	for _, o := range opts {
		if o != nil {
			o(p)
		}
	}
	p.bounds, p.cfgErr = configure(p.cfg, p.sessionTimeout)
	return p
}

// SessionBound is the longest the server keeps the session, and so the
// lock, of a holder it no longer hears from: the session timeout, or less
// if the connection's own settings end it sooner.
func (p *Protocol) SessionBound() time.Duration { return p.bounds.end }

// Dial parses connString (a URL "postgres://user@host:port/db?sslmode=..."
// or libpq's "key=value" form; the PG* environment variables fill in what
// it leaves out, as with psql), connects once to check that the server
// answers, and returns a Protocol. Connection errors wrap ErrUnreachable;
// they never show the password.
func Dial(ctx context.Context, connString string, opts ...Option) (*Protocol, error) {
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return nil, &lock.Error{Op: "dial", Path: redact.URL(connString), Err: err,
			Hint: "want postgres://user@host:port/database?param=value, or libpq's key=value form"}
	}
	p := New(cfg, opts...)
	if p.cfgErr != nil {
		return nil, &lock.Error{Op: "dial", Path: redact.URL(connString), Err: p.cfgErr}
	}
	c, err := p.connect(ctx)
	if err != nil {
		return nil, err
	}
	p.put(c)
	return p, nil
}

// Close closes the idle connections. Locks still held keep their own
// connections until they are released.
func (p *Protocol) Close() error {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
	return nil
}

// Name returns "postgres".
func (p *Protocol) Name() string { return "postgres" }

// NamedPath returns name itself: a hold.Named lock is the lock of that name
// in the database, the same for every client of it.
func (p *Protocol) NamedPath(name string) string { return name }

// where describes the server for error messages: host:port/database,
// never the user's password.
func (p *Protocol) where() string {
	return fmt.Sprintf("%s:%d/%s", p.cfg.Host, p.cfg.Port, p.cfg.Database)
}

// conn is one database session with the context handling a lock needs: a
// wait for a lock is ended on the server with a cancel request, so that an
// abandoned wait never takes the lock, while any other round trip whose
// context ends just interrupts the read (a cancel request costs a
// connection of its own and a pause).
type conn struct {
	c  *pgx.Conn
	wh *switchHandler
	// ran holds the statements this session has run before (see mode).
	ran map[string]bool
	// idleSince is when the session was put back idle: the server ends
	// a session idle for its idle_session_timeout, so get passes over
	// one idle for nearly that long.
	idleSince time.Time
}

// mode returns how this session is to run the statement sql. Its first run
// goes as an unnamed statement, parsed, bound and executed in one round
// trip; later runs go through pgx's cache of prepared statements, which
// prepares it on the second run (a round trip of its own: pgx asks the
// server for the parameter types) and from then on binds and executes it in
// one. A session that runs a statement once, as a `hold run` does with its
// acquisition and its unlock, so never pays for preparing it, and one kept
// for many locks pays the same round trips as before, one run later. The
// parameters are int64 and string values, whose types pgx knows without
// asking.
func (c *conn) mode(sql string) pgx.QueryExecMode {
	if c.ran[sql] {
		return pgx.QueryExecModeCacheStatement
	}
	if c.ran == nil {
		c.ran = make(map[string]bool, 4)
	}
	c.ran[sql] = true
	return pgx.QueryExecModeExec
}

// switchHandler is a pgconn context-watcher handler that cancels on the
// server while cancelOnServer is set and interrupts the socket read
// otherwise.
type switchHandler struct {
	cancelOnServer bool // set only while no query runs
	server         ctxwatch.Handler
	local          ctxwatch.Handler
	active         ctxwatch.Handler
}

func (h *switchHandler) HandleCancel(ctx context.Context) {
	h.active = h.local
	if h.cancelOnServer {
		h.active = h.server
	}
	h.active.HandleCancel(ctx)
}

func (h *switchHandler) HandleUnwatchAfterCancel() { h.active.HandleUnwatchAfterCancel() }

// cancelRequestGrace is how long a cancelled wait waits for the server to
// answer its cancel request before it gives up on the connection.
const cancelRequestGrace = 2 * time.Second

// connect opens a new session.
func (p *Protocol) connect(ctx context.Context) (*conn, error) {
	if p.cfgErr != nil {
		return nil, &lock.Error{Op: "dial", Path: p.where(), Err: p.cfgErr}
	}
	cfg := p.cfg.Copy()
	wh := &switchHandler{}
	cfg.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		wh.server = &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: cancelRequestGrace}
		wh.local = &pgconn.DeadlineContextWatcherHandler{Conn: pc.Conn()}
		return wh
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			return nil, &lock.Error{Op: "dial", Path: p.where(), Err: lock.WaitError(ctx.Err())}
		}
		e := &lock.Error{Op: "dial", Path: p.where(), Err: fmt.Errorf("%s: %w", p.where(), err)}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			// No answer from the server at all, as opposed to a
			// refusal (wrong password, no such database).
			e.Err = fmt.Errorf("%w: %s", ErrUnreachable, dialProblem(err))
			e.Hint = "check the host and port, that PostgreSQL runs there and accepts TCP connections"
		}
		return nil, e
	}
	return &conn{c: c, wh: wh}, nil
}

// dialProblem says in a few words why a connection could not be made:
// the network error at its root ("connect to 127.0.0.1:1: connection
// refused"), not the driver's chain of wrappers, each of which repeats
// the address.
func dialProblem(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		cause := op.Err
		var sys *os.SyscallError
		if errors.As(cause, &sys) {
			cause = sys.Err
		}
		if op.Addr != nil {
			verb := op.Op
			if verb == "dial" {
				verb = "connect"
			}
			return fmt.Sprintf("%s to %s: %v", verb, op.Addr, cause)
		}
		return fmt.Sprintf("%s: %v", op.Op, cause)
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.Error()
	}
	return err.Error()
}

// get returns an idle session, or a new one. reused says it was idle:
// the server may have ended it since.
func (p *Protocol) get(ctx context.Context) (c *conn, reused bool, err error) {
	p.mu.Lock()
	for len(p.idle) > 0 {
		c = p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if !c.c.IsClosed() && time.Since(c.idleSince) < p.bounds.end/2 {
			p.mu.Unlock()
			return c, true, nil
		}
		go c.close()
	}
	p.mu.Unlock()
	c, err = p.connect(ctx)
	return c, false, err
}

// put keeps a session that holds no lock for a later acquisition.
func (p *Protocol) put(c *conn) {
	if c.c.IsClosed() {
		return
	}
	p.mu.Lock()
	if !p.closed && len(p.idle) < p.maxIdle {
		c.idleSince = time.Now()
		p.idle = append(p.idle, c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// close ends the session, which frees every advisory lock it holds.
func (c *conn) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.c.Close(ctx)
}

// rpc bounds one round trip by the request timeout as well as ctx.
func (p *Protocol) rpc(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.reqTimeout)
}

// Key returns the advisory-lock key of a lock name: the first 8 bytes of
// the SHA-256 of "hold:" and the name, as a signed 64-bit integer. The
// one-argument (bigint) form of PostgreSQL's advisory locks takes it.
// Two names share a key with a chance of about n²/2⁶⁵ among n names; the
// table hold_locks records the name of each key, and an acquisition that
// finds another name there fails instead of sharing the lock.
func Key(name string) int64 {
	sum := sha256.Sum256([]byte("hold:" + name))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// keyHalves splits a key as pg_locks shows it: classid is the high half,
// objid the low half.
func keyHalves(key int64) (hi, lo int64) {
	u := uint64(key)
	return int64(u >> 32), int64(u & 0xffffffff)
}

// maxNameLen bounds a lock name.
const maxNameLen = 512

// checkName validates a lock name: printable UTF-8 of at most 512 bytes.
func checkName(op, name string) error {
	why := ""
	switch {
	case name == "":
		why = "empty name"
	case len(name) > maxNameLen:
		why = fmt.Sprintf("longer than %d bytes", maxNameLen)
	case !utf8.ValidString(name):
		why = "not valid UTF-8"
	case strings.IndexFunc(name, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }) >= 0:
		why = "contains a control character"
	}
	if why == "" {
		return nil
	}
	return &lock.Error{Op: op, Path: name, Err: lock.ErrInvalidName,
		Hint: "a PostgreSQL lock name is printable UTF-8 of at most 512 bytes: " + why}
}

// ParseAddress splits a lock address "postgres://user@host:port/db#name"
// (or "postgresql://...") into the connection string (the address without
// its fragment, for Dial) and the lock name (the fragment, %-decoded).
// Query parameters are libpq's (sslmode, sslrootcert, application_name,
// ...); what the address leaves out comes from the PG* environment
// variables. A password in the address works but shows in process lists:
// use PGPASSWORD or a password file. Errors never repeat the password.
func ParseAddress(addr string) (connString, name string, err error) {
	connString, name, err = parseAddress(addr, false)
	return
}

// ParseListAddress is ParseAddress for a listing: the part after # is a
// prefix of lock names, and may be missing or empty (every lock).
func ParseListAddress(addr string) (connString, prefix string, err error) {
	return parseAddress(addr, true)
}

func parseAddress(addr string, list bool) (connString, name string, err error) {
	bad := func(why string) error {
		return &lock.Error{Op: "parse", Path: redact.URL(addr), Err: fmt.Errorf("malformed PostgreSQL address: %s", why),
			Hint: "want postgres://user@host:port/database#lock-name"}
	}
	scheme, _, ok := strings.Cut(addr, "://")
	if !ok || (scheme != "postgres" && scheme != "postgresql") {
		return "", "", bad("it does not start with postgres:// or postgresql://")
	}
	connString, frag, ok := strings.Cut(addr, "#")
	if (!ok || frag == "") && !list {
		return "", "", bad("no lock name after # at its end")
	}
	name, err = url.PathUnescape(frag)
	if err != nil {
		return "", "", bad("lock name: " + err.Error())
	}
	if _, err := url.Parse(connString); err != nil {
		return "", "", bad("not a URL")
	}
	if list {
		return connString, name, nil
	}
	if err := checkName("parse", name); err != nil {
		return "", "", err
	}
	return connString, name, nil
}
