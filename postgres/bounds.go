package postgres

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// How long a holder cut off from the server keeps the lock.
//
// The server frees an advisory lock when the session holding it ends, and
// on its own it ends a session whose client vanished without a word only
// when TCP gives up on the connection: by default after two hours of
// keep-alive silence. So hold's sessions set, in their startup packet, the
// bounds a session may set for itself:
//
//   - idle_session_timeout ends a session that has run nothing for that
//     long. A holder runs a heartbeat query more often than that; a holder
//     that is cut off, paused or gone stops, and the server ends its
//     session. This bound does not depend on what the server's socket
//     sees, so it holds behind a TCP proxy too, whose socket to the server
//     stays healthy while the client is gone.
//   - tcp_user_timeout, tcp_keepalives_idle, _interval and _count end a
//     session whose peer stopped answering at the TCP level, where the
//     server's own socket sees the partition; client_connection_check_interval
//     makes a waiter blocked in pg_advisory_lock notice it too, so that a
//     cut-off waiter leaves the queue instead of being granted a lock
//     nobody will use.
//
// The client's socket gets matching keep-alive and user-timeout settings
// (libpq's keepalives_* and tcp_user_timeout keywords in the address
// override them), so that it sees a dead server about as soon.
//
// The startup packet also pins the settings a server, database or role may
// have that would change what a lock does (see pinned).

// DefaultSessionTimeout is how long the server keeps the session, and so
// the lock, of a holder that stopped talking to it (cut off, paused,
// vanished): the lock is free for the next waiter at most this long (and a
// heartbeat period) after the holder was last heard.
const DefaultSessionTimeout = 15 * time.Second

// WithSessionTimeout sets the bound the server keeps a silent holder's
// session and lock (default DefaultSessionTimeout): it becomes the
// session's idle_session_timeout and tcp_user_timeout, and sets its TCP
// keep-alive. An address that sets idle_session_timeout itself (a query
// parameter, in milliseconds) sets this bound instead.
func WithSessionTimeout(d time.Duration) Option {
	return func(p *Protocol) {
		if d > 0 {
			p.sessionTimeout = d
		}
	}
}

// serverBounds are the settings the session asks the server for: the
// startup parameters, and the earliest moment after the server last heard
// of the holder at which it may end the session (end).
type serverBounds struct {
	params map[string]string
	end    time.Duration
}

// The server settings hold sets (PostgreSQL 14 and later know them all).
const (
	idleSessionTimeout  = "idle_session_timeout"
	tcpUserTimeout      = "tcp_user_timeout"
	tcpKeepalivesIdle   = "tcp_keepalives_idle"
	tcpKeepalivesIntvl  = "tcp_keepalives_interval"
	tcpKeepalivesCount  = "tcp_keepalives_count"
	clientConnCheckIntv = "client_connection_check_interval"
)

// bounds computes the server settings for a session timeout d, keeping
// any of them the connection string set itself, and the earliest end they
// allow.
func bounds(d time.Duration, set map[string]string) (serverBounds, error) {
	secs := func(x time.Duration) string { return strconv.Itoa(max(1, int(x/time.Second))) }
	ms := func(x time.Duration) string { return strconv.FormatInt(x.Milliseconds(), 10) }
	want := map[string]string{
		idleSessionTimeout:  ms(d),
		tcpUserTimeout:      ms(d),
		tcpKeepalivesIdle:   secs(d / 3),
		tcpKeepalivesIntvl:  secs(d / 6),
		tcpKeepalivesCount:  "3",
		clientConnCheckIntv: ms(min(time.Second, d/4)),
	}
	for k := range want {
		if v, ok := set[k]; ok {
			want[k] = v
		}
	}
	num := func(k string) (int64, error) {
		n, err := strconv.ParseInt(want[k], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%s=%q: want a whole number of %s", k, want[k], map[bool]string{true: "seconds", false: "milliseconds"}[k == tcpKeepalivesIdle || k == tcpKeepalivesIntvl || k == tcpKeepalivesCount])
		}
		return n, nil
	}
	idle, err := num(idleSessionTimeout)
	if err != nil {
		return serverBounds{}, err
	}
	if idle == 0 {
		return serverBounds{}, fmt.Errorf("%s=0 turns off the bound hold keeps a cut-off holder's lock by; leave it out (default %s) or set a number of milliseconds", idleSessionTimeout, DefaultSessionTimeout)
	}
	end := time.Duration(idle) * time.Millisecond
	// The TCP settings can end the session sooner. The user timeout
	// runs from data the server sent (an answer to the last heartbeat,
	// sent after the heartbeat was); keep-alive probes start after a
	// silence counted from what the server last received, and with a
	// user timeout set Linux ends the connection on them only once that
	// has passed too.
	ut, err := num(tcpUserTimeout)
	if err != nil {
		return serverBounds{}, err
	}
	if ut > 0 {
		end = min(end, time.Duration(ut)*time.Millisecond)
	} else {
		ki, err1 := num(tcpKeepalivesIdle)
		kv, err2 := num(tcpKeepalivesIntvl)
		kc, err3 := num(tcpKeepalivesCount)
		for _, e := range []error{err1, err2, err3} {
			if e != nil {
				return serverBounds{}, e
			}
		}
		if ki > 0 && kc > 0 {
			end = min(end, time.Duration(ki+kv*kc)*time.Second)
		}
	}
	return serverBounds{params: want, end: end}, nil
}

// setting is one server setting hold fixes for its sessions, and why.
type setting struct{ name, value, why string }

// pinned are the settings every session of hold's sets in its startup
// packet, where they override what the server's configuration, the
// database and the role (ALTER DATABASE/ROLE ... SET) say: each of these
// would change what a lock does if a DBA set it for other reasons. idle is
// the session's idle_session_timeout, in milliseconds.
func pinned(idle string) []setting {
	return []setting{
		{"lock_timeout", "0", "a lock_timeout ends the wait for the advisory lock early; hold bounds its waits by the caller's context"},
		{"statement_timeout", "0", "the acquisition is one statement that lasts as long as the wait; hold bounds its waits and round trips itself"},
		{"idle_in_transaction_session_timeout", idle, "hold's statements run in transactions of their own and never leave one open, and the bound the server keeps a silent holder's session by is idle_session_timeout's"},
		{"default_transaction_isolation", "read committed", "under repeatable read or serializable, a waiter whose turn comes would find the lock's row changed since its statement began, and fail (SQLSTATE 40001) instead of taking the lock"},
		{"synchronous_commit", "on", "the acquisition's commit must be on disk before its fencing token is used, so that a crash cannot take the sequence back and hand the token out again"},
	}
}

// clientSocket is how the client's socket is set up: libpq's connection
// keywords, which pgx does not know and would pass on to the server as
// settings (which the server refuses: "unrecognized configuration
// parameter"), taken out of the runtime parameters.
type clientSocket struct {
	keepalives  bool
	idle, intvl time.Duration
	count       int
	userTimeout time.Duration
}

// libpq's keep-alive keywords: not settings for the server.
var libpqSocketKeywords = []string{"keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout"}

// takeSocketKeywords removes libpq's socket keywords from params and
// returns the client socket settings: those keywords, with what the
// session timeout d implies for the ones left out. tcp_user_timeout in an
// address is libpq's (the client's socket), as it is for psql; the
// server's is set from d.
func takeSocketKeywords(params map[string]string, d time.Duration) (clientSocket, error) {
	s := clientSocket{keepalives: true, idle: max(time.Second, d/3), intvl: max(time.Second, d/6), count: 3, userTimeout: d}
	for _, k := range libpqSocketKeywords {
		v, ok := params[k]
		if !ok {
			continue
		}
		delete(params, k)
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return s, fmt.Errorf("%s=%q: want a whole number, as libpq does", k, v)
		}
		switch k {
		case "keepalives":
			s.keepalives = n != 0
		case "keepalives_idle":
			s.idle = time.Duration(n) * time.Second
		case "keepalives_interval":
			s.intvl = time.Duration(n) * time.Second
		case "keepalives_count":
			s.count = n
		case "tcp_user_timeout":
			s.userTimeout = time.Duration(n) * time.Millisecond
		}
	}
	return s, nil
}

// dialer returns the function pgx dials the server with.
func (s clientSocket) dialer(timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout, KeepAlive: -1}
	if s.keepalives {
		d.KeepAliveConfig = net.KeepAliveConfig{Enable: true, Idle: s.idle, Interval: s.intvl, Count: s.count}
	}
	if s.userTimeout > 0 {
		ut := s.userTimeout
		d.Control = func(network, address string, c syscall.RawConn) error {
			if network != "tcp" && network != "tcp4" && network != "tcp6" {
				return nil
			}
			var serr error
			if err := c.Control(func(fd uintptr) { serr = setUserTimeout(fd, ut) }); err != nil {
				return err
			}
			return serr
		}
	}
	return d.DialContext
}

// configure applies the session timeout to a parsed connection
// configuration: libpq's socket keywords go to the client's socket, the
// bounds to the startup parameters.
func configure(cfg *pgx.ConnConfig, d time.Duration) (serverBounds, error) {
	if v, ok := cfg.RuntimeParams[idleSessionTimeout]; ok {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
			d = time.Duration(n) * time.Millisecond
		}
	}
	sock, err := takeSocketKeywords(cfg.RuntimeParams, d)
	if err != nil {
		return serverBounds{}, err
	}
	b, err := bounds(d, cfg.RuntimeParams)
	if err != nil {
		return serverBounds{}, err
	}
	for k, v := range b.params {
		cfg.RuntimeParams[k] = v
	}
	for _, s := range pinned(b.params[idleSessionTimeout]) {
		if v, ok := cfg.RuntimeParams[s.name]; ok && v != s.value {
			return serverBounds{}, fmt.Errorf("%s=%q: hold sets %s=%s for its own sessions, because %s; leave it out of the address", s.name, v, s.name, s.value, s.why)
		}
		cfg.RuntimeParams[s.name] = s.value
	}
	timeout := cfg.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultDialTimeout
	}
	cfg.DialFunc = sock.dialer(timeout)
	return b, nil
}
