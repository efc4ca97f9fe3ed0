// Package pgtest runs a throwaway PostgreSQL server for tests of code that
// takes locks on PostgreSQL: initdb into a new temporary directory, then the
// server on 127.0.0.1 with a free port and its unix socket inside that
// directory, with trust authentication for the user "hold".
//
// It uses the server binaries of the machine (Debian's postgresql package
// puts them under /usr/lib/postgresql/VERSION/bin, which is not on PATH).
// initdb and postgres refuse to run as root, so when the test runs as root
// they run as the unprivileged user "nobody" (or $HOLD_PGTEST_USER), which
// owns the temporary directory.
//
// The server runs without fsync: it is fast to start and to write, and not
// durable across a machine crash, which a test does not need. A clean
// restart (Restart) keeps everything.
package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoServer means the PostgreSQL server binaries were not found; tests
// skip on it.
var ErrNoServer = errors.New("PostgreSQL server binaries (initdb, postgres) not found")

// User is the database superuser of a test server.
const User = "hold"

// binEnv names a directory holding initdb and postgres, overriding the
// search.
const binEnv = "HOLD_PGTEST_BIN"

// userEnv names the unprivileged user the server runs as when the test
// runs as root.
const userEnv = "HOLD_PGTEST_USER"

// FindBin returns the directory holding initdb and postgres: $HOLD_PGTEST_BIN,
// else the newest /usr/lib/postgresql/*/bin, else the directory of initdb on
// PATH. It returns an error wrapping ErrNoServer when there is none.
func FindBin() (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.IsDir() {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv(binEnv); dir != "" {
		if has(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("%w in $%s (%s)", ErrNoServer, binEnv, dir)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	// Newest version first: "16" sorts after "15", "9.6" must sort
	// before "10".
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(a)), 64)
		vb, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(b)), 64)
		switch {
		case va > vb:
			return -1
		case va < vb:
			return 1
		}
		return 0
	})
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if d := filepath.Dir(p); has(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w (install Debian's postgresql package, or set $%s)", ErrNoServer, binEnv)
}

// Server is a running test server.
type Server struct {
	// Port is the TCP port on 127.0.0.1.
	Port int

	bin, dir, data string
	hosts          []string // listen addresses besides 127.0.0.1
	settings       []string // "name=value" for postgres -c, besides pgtest's
	// uid and gid are the user the server runs as, when asUser.
	uid, gid int
	asUser   bool
	cmd      *exec.Cmd
	exited   chan struct{}
}

// Start creates a database cluster in a new temporary directory and starts
// a server on it. Close stops it and removes the directory.
func Start() (*Server, error) { return StartListening() }

// StartListening is Start for a server that also listens on hosts (IP
// addresses of this machine, such as a faultnet.Link's HostIP), for a
// client in another network namespace.
func StartListening(hosts ...string) (*Server, error) {
	return start(hosts, nil)
}

// StartWith is Start for a server with settings of its own ("name=value",
// as postgres -c takes them), such as synchronous_commit=off.
func StartWith(settings ...string) (*Server, error) {
	return start(nil, settings)
}

func start(hosts, settings []string) (*Server, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "hold-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, data: filepath.Join(dir, "data"), hosts: hosts, settings: settings}
	if err := s.init(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.trustHosts(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := s.start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// init runs initdb, as an unprivileged user if this process is root.
func (s *Server) init() error {
	if os.Geteuid() == 0 {
		name := os.Getenv(userEnv)
		if name == "" {
			name = "nobody"
		}
		u, err := user.Lookup(name)
		if err != nil {
			return fmt.Errorf("pgtest: running as root, and the unprivileged user to run PostgreSQL as is missing: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.uid, s.gid, s.asUser = uid, gid, true
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return err
		}
	}
	// The temporary directory is private to its owner; the server
	// refuses a data directory others can read.
	cmd := s.command(filepath.Join(s.bin, "initdb"), "-D", s.data, "-U", User, "-A", "trust",
		"-E", "UTF8", "--no-locale", "--no-sync")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	return nil
}

// trustHosts lets clients in the /24 of each extra listen address in
// without a password, as initdb's -A trust does for loopback.
func (s *Server) trustHosts() error {
	if len(s.hosts) == 0 {
		return nil
	}
	f, err := os.OpenFile(filepath.Join(s.data, "pg_hba.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, h := range s.hosts {
		ip := net.ParseIP(h).To4()
		if ip == nil {
			return fmt.Errorf("pgtest: listen address %q: want an IPv4 address", h)
		}
		if _, err := fmt.Fprintf(f, "host all all %d.%d.%d.0/24 trust\n", ip[0], ip[1], ip[2]); err != nil {
			return err
		}
	}
	return nil
}

// command prepares one of the server's programs to run as the server's user.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "HOME="+s.dir)
	cmd.SysProcAttr = sysProcAttr(s.uid, s.gid, s.asUser)
	return cmd
}

// start starts the server on s.Port (a free one when zero) and waits until
// it accepts connections.
func (s *Server) start() error {
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		port := s.Port
		if port == 0 {
			var err error
			if port, err = freePort(); err != nil {
				return err
			}
		}
		if lastErr = s.run(port); lastErr == nil {
			s.Port = port
			return nil
		}
		if s.Port != 0 {
			break // a restart keeps its port, or fails
		}
	}
	return lastErr
}

// run starts the server on port and waits until it accepts connections.
func (s *Server) run(port int) error {
	logPath := filepath.Join(s.dir, "server.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	if s.asUser {
		os.Chown(logPath, s.uid, s.gid)
	}
	args := []string{"-D", s.data, "-p", strconv.Itoa(port),
		"-h", strings.Join(append([]string{"127.0.0.1"}, s.hosts...), ","), "-k", s.dir,
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200",
		"-c", "shared_buffers=32MB", "-c", "log_min_messages=warning"}
	for _, kv := range s.settings {
		args = append(args, "-c", kv)
	}
	cmd := s.command(filepath.Join(s.bin, "postgres"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: starting postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-exited:
			b, _ := os.ReadFile(logPath)
			return fmt.Errorf("pgtest: postgres exited at start: %s", lastLines(string(b), 10))
		default:
		}
		if ready(port) {
			s.cmd, s.exited = cmd, exited
			return nil
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-exited
			return errors.New("pgtest: postgres did not accept connections within 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ready reports whether the server on port answers a startup message
// with an authentication request, that is, accepts connections now (a
// server still starting answers with an error).
func ready(port int) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	// StartupMessage: length, protocol 3.0, user, database.
	params := "user\x00" + User + "\x00database\x00postgres\x00\x00"
	n := 8 + len(params)
	msg := append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n), 0, 3, 0, 0}, params...)
	if _, err := c.Write(msg); err != nil {
		return false
	}
	buf := make([]byte, 1)
	if _, err := c.Read(buf); err != nil {
		return false
	}
	return buf[0] == 'R' // Authentication*, not 'E'
}

// Stop stops the server with a fast shutdown: sessions are ended, and
// everything is written out.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return nil
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
	return nil
}

// CrashRestart stops the server the way a crash of its processes does
// (an immediate shutdown: no checkpoint, and what its WAL buffers held
// that was not written yet is lost; fsync is off, but what was written
// survives in the page cache, as it does when the server's processes die
// and the machine does not), then starts it again on the same port, where
// it recovers from its WAL.
func (s *Server) CrashRestart() error {
	if s.cmd != nil {
		s.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
		s.cmd = nil
	}
	return s.start()
}

// Restart stops the server and starts it again on the same port.
func (s *Server) Restart() error {
	s.Stop()
	return s.start()
}

// Close stops the server and removes its directory.
func (s *Server) Close() {
	s.Stop()
	os.RemoveAll(s.dir)
}

// Addr returns "127.0.0.1:PORT".
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// URL returns a connection URL for the superuser and database, without
// TLS: "postgres://hold@127.0.0.1:PORT/DB?sslmode=disable".
func (s *Server) URL(db string) string {
	return "postgres://" + User + "@" + s.Addr() + "/" + db + "?sslmode=disable"
}

// URLAs is URL for another user (a role the test created; the server
// trusts every user on loopback).
func (s *Server) URLAs(user, db string) string {
	return "postgres://" + user + "@" + s.Addr() + "/" + db + "?sslmode=disable"
}

// URLVia is URL for a client that reaches the server at host:port (a proxy,
// or one of the addresses of StartListening).
func (s *Server) URLVia(host string, port int, db string) string {
	return "postgres://" + User + "@" + net.JoinHostPort(host, strconv.Itoa(port)) + "/" + db + "?sslmode=disable"
}

// ConnString returns a connection URL for the database "postgres".
func (s *Server) ConnString() string { return s.URL("postgres") }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
