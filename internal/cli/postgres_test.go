//go:build unix

package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/postgres"
	"github.com/hold-dev/hold/postgres/pgtest"
)

// TestPostgres runs `hold` against a real PostgreSQL server, one for all
// the subtests (a server takes a second or two to create).
func TestPostgres(t *testing.T) {
	srv, err := pgtest.Start()
	if errors.Is(err, pgtest.ErrNoServer) {
		testenv.MissingTool(t, "PostgreSQL", err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	// A password in the address: the test server trusts every local
	// connection, so it is never asked for, but must never be shown.
	const secret = "s3cret-Pa55"
	base := fmt.Sprintf("postgres://%s:%s@%s/postgres?sslmode=disable", pgtest.User, secret, srv.Addr())
	t.Run("MixedWithLibrary", func(t *testing.T) { testPostgresMixed(t, srv, base+"#counter") })
	t.Run("StatusAndBusy", func(t *testing.T) { testPostgresStatus(t, base+"#deploy", secret) })
	t.Run("Break", func(t *testing.T) {
		testPostgresBreak(t, strings.Replace(base, "postgres://", "postgresql://", 1)+"#stuck")
	})
	t.Run("BadInput", func(t *testing.T) { testPostgresBadInput(t, srv, secret) })
	t.Run("Ls", func(t *testing.T) { testPostgresLs(t, base, secret) })
	t.Run("Companions", func(t *testing.T) { testPostgresCompanions(t, base+"#companion") })
}

// testPostgresCompanions: hold hands a postgres:// command line to
// hold-postgres when it is installed beside hold, and to hold-remote, which
// serves every backend, when it is not; hold-postgres hands an etcd://
// target on to hold-remote.
func testPostgresCompanions(t *testing.T, addr string) {
	// The command prints the name of its parent, the process that
	// holds the lock: hold hands over with exec, so that is the
	// companion. (/proc where there is one: ps is not on every
	// minimal system.)
	const parent = `cat /proc/$PPID/comm 2>/dev/null || ps -o comm= -p $PPID`
	installed := filepath.Dir(holdBin)
	alone := t.TempDir()
	for _, name := range []string{"hold", "hold-remote"} {
		b, err := os.ReadFile(filepath.Join(installed, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(alone, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ dir, want string }{
		{installed, "hold-postgres"},
		{alone, "hold-remote"},
	} {
		cmd := exec.Command(filepath.Join(c.dir, "hold"), "run", addr, "-c", parent)
		// Nothing on PATH but the shell's tools: only a companion
		// beside hold can serve.
		cmd.Env = append(os.Environ(), "PATH=/usr/bin:/bin")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("hold in %s: %v: %s", c.dir, err, out)
			continue
		}
		if got := strings.TrimSpace(string(out)); got != c.want {
			t.Errorf("hold in %s: the lock was held by %q, want %s", c.dir, got, c.want)
		}
	}
	// hold-postgres, run directly, does not link etcd: it hands an
	// etcd:// target on (here to a server that is not there).
	r := runHoldEnv(t, t.TempDir(), nil, "status", "etcd://127.0.0.1:1/x")
	direct := exec.Command(filepath.Join(installed, "hold-postgres"), "status", "etcd://127.0.0.1:1/x")
	out, _ := direct.CombinedOutput()
	if code := direct.ProcessState.ExitCode(); code != r.code || strings.Contains(string(out), "unknown address scheme") {
		t.Errorf("hold-postgres status etcd://: exit %d, output %q; want hold-remote's exit %d", code, out, r.code)
	}
}

// testPostgresLs: `hold ls postgres://...` lists the database's locks (or
// those whose names start with the part after #), with the holder and the
// sessions waiting, and never shows the password.
func testPostgresLs(t *testing.T, base, secret string) {
	dir := t.TempDir()
	holder, waiter := lsHolderAndWaiter(t, dir, base+"#ls-deploy", base+"#ls-", "ls-deploy", "postgres")
	r := runHold(t, dir, "ls", base)
	if r.code != 0 || !strings.Contains(r.stdout, "ls-deploy") || strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("hold ls (every lock): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, holder)
	waitExit(t, waiter)
	got := lsJSON(t, dir, base+"#ls-")
	if l, ok := got["ls-deploy"]; !ok || l.State != "free" {
		t.Errorf("after the holders left: %+v", got)
	}
}

// testPostgresMixed: `hold run postgres://...` processes and library
// clients in this process increment one file under one lock, and lose no
// increment.
func testPostgresMixed(t *testing.T, srv *pgtest.Server, addr string) {
	const processes, runs = 4, 10
	const clients, each = 4, 25
	dir := t.TempDir()
	counter := filepath.Join(dir, "counter")
	errs := make(chan error, processes+clients)
	runIncrementers(dir, processes, runs, errs, "run", addr)
	_, name, err := postgres.ParseAddress(addr)
	if err != nil {
		t.Fatal(err)
	}
	for range clients {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 4*hangLimit)
			defer cancel()
			p, err := postgres.Dial(ctx, srv.ConnString())
			if err != nil {
				errs <- err
				return
			}
			defer p.Close()
			for range each {
				err := hold.Do(ctx, "", func(context.Context) error {
					b, err := os.ReadFile(counter)
					if errors.Is(err, os.ErrNotExist) {
						b = []byte("0")
					} else if err != nil {
						return err
					}
					n, err := strconv.Atoi(strings.TrimSpace(string(b)))
					if err != nil {
						return fmt.Errorf("counter holds %q", b)
					}
					return os.WriteFile(counter, []byte(strconv.Itoa(n+1)+"\n"), 0o644)
				}, hold.WithProtocol(p), hold.LockFile(name))
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	collect(t, errs, processes+clients, 4*hangLimit)
	got := strings.TrimSpace(readFile(t, counter))
	if want := strconv.Itoa(processes*runs + clients*each); got != want {
		t.Fatalf("counter = %s, want %s", got, want)
	}
}

// testPostgresStatus: status names the holder and its token, -n and -w
// fail with exit 1 while it is held, and the password in the holder's
// address never shows.
func testPostgresStatus(t *testing.T, addr, secret string) {
	dir := t.TempDir()
	holder, _ := startHold(t, dir, "run", "--field", "job=nightly", addr, "-c", gatedCommand)
	waitFor(t, filepath.Join(dir, "ready"))
	t.Cleanup(func() { os.WriteFile(filepath.Join(dir, "go"), nil, 0o644) })

	rep := checkRemoteHeld(t, dir, addr, "postgres", secret, holder, ":***@")
	// The recorded command is the one typed, `hold run ...`, not the
	// companion hold handed it to.
	if rep.Holder != nil && (len(rep.Holder.Command) < 2 || rep.Holder.Command[0] != holdBin || rep.Holder.Command[1] != "run") {
		t.Errorf("the recorded command is %q, want %s run ...", rep.Holder.Command, holdBin)
	}
}

// testPostgresBreak: break refuses a live session's lock; --force prints
// the holder, ends its session, and the holder's `hold run` learns it lost
// the lock, stops its command and exits 65.
func testPostgresBreak(t *testing.T, addr string) {
	checkRemoteBreak(t, addr)
}

// testPostgresBadInput: malformed addresses are usage errors that do not
// echo the password; an unreachable server and a missing database fail
// fast and say so.
func testPostgresBadInput(t *testing.T, srv *pgtest.Server, secret string) {
	dir := t.TempDir()
	for _, addr := range []string{
		"postgres://u:" + secret + "@127.0.0.1:5432/db",
		"postgres://u:" + secret + "@127.0.0.1:5432/db#",
		"postgresql://u:" + secret + "@127.0.0.1:5432/db#a%01b",
	} {
		r := runHold(t, dir, "run", addr, "--", "true")
		if r.code != exitUsage || strings.Contains(r.stderr, secret) {
			t.Errorf("run %s: exit %d (%s), want %d without the password", addr, r.code, r.stderr, exitUsage)
		}
	}
	start := time.Now()
	r := runHold(t, dir, "run", "postgres://u:"+secret+"@127.0.0.1:1/db?sslmode=disable#x", "--", "true")
	if r.code != exitUnavailable || exitUnavailable == exitLockError || !strings.Contains(r.stderr, "unreachable") || strings.Contains(r.stderr, secret) {
		t.Errorf("unreachable server: exit %d, want %d (the server is unavailable), stderr %q", r.code, exitUnavailable, r.stderr)
	}
	// The cause is said once, and the address not over and over.
	if n := strings.Count(r.stderr, "connection refused"); n != 1 || strings.Count(r.stderr, "127.0.0.1:1") > 2 {
		t.Errorf("unreachable server: the message repeats itself: %q", r.stderr)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("unreachable server took %s to report", d)
	}
	r = runHold(t, dir, "status", srv.URL("no_such_db")+"#x")
	if r.code == 0 || !strings.Contains(r.stderr, "no_such_db") {
		t.Errorf("missing database: exit %d, stderr %q", r.code, r.stderr)
	}
	// PG* variables fill in what the address leaves out.
	cmd := exec.Command(holdBin, "run", "postgres:///postgres?sslmode=disable#env", "--", "true")
	cmd.Env = append(os.Environ(), "PGHOST=127.0.0.1", "PGPORT="+strconv.Itoa(srv.Port), "PGUSER="+pgtest.User)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("run with the server from PG* variables: %v: %s", err, out)
	}
}
