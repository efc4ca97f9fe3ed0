package postgres_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/postgres"
)

// hangLimit bounds waits that only a bug makes long.
const hangLimit = 20 * time.Second

// sessions returns the backend pids holding (granted) or waiting for
// (!granted) name's advisory lock.
func sessions(t *testing.T, c *pgx.Conn, name string, granted bool) []int32 {
	t.Helper()
	rows, _ := c.Query(context.Background(), `SELECT pid FROM pg_locks WHERE locktype = 'advisory'
		AND objsubid = 1 AND classid::bigint = ($1::bigint >> 32) & 4294967295 AND objid::bigint = $1::bigint & 4294967295
		AND granted = $2 ORDER BY pid`, postgres.Key(name), granted)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// eventually polls cond until it holds, or fails the test after hangLimit.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, hangLimit, what, cond)
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// TestFIFO: waiters get the lock in the order they queued on the server.
func TestFIFO(t *testing.T) {
	p := dial(t)
	raw := rawConn(t)
	name := uniqueName(t)
	l, err := hold.Acquire(ctxFor(t, hangLimit), "", lockOpts(p, name)...)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 6
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := hold.Acquire(ctxFor(t, hangLimit), "", lockOpts(p, name)...)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			errs <- w.Release()
		}()
		// Queue the next waiter only once this one waits on the server.
		eventually(t, "waiter "+strconv.Itoa(i)+" queued", func() bool { return len(sessions(t, raw, name, false)) == i+1 })
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, w := range order {
		if w != i {
			t.Fatalf("waiters got the lock in the order %v, want the order they queued", order)
		}
	}
}

// TestKilledHolder: a holder process killed with SIGKILL cannot release;
// the server frees its lock as soon as it sees the connection close, and
// the next acquirer gets a larger token.
func TestKilledHolder(t *testing.T) {
	p := dial(t)
	name := uniqueName(t)
	cmd, old := startHolder(t, name)
	if _, err := hold.TryAcquire("", lockOpts(p, name)...); !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("TryAcquire while the other process holds = %v, want ErrBusy", err)
	}
	// Queue first, so that the hand-over is the server's, not a retry.
	got := make(chan error, 1)
	var l *hold.Lock
	go func() {
		var err error
		l, err = hold.Acquire(ctxFor(t, hangLimit), "", lockOpts(p, name)...)
		got <- err
	}()
	eventually(t, "waiter queued", func() bool { return len(sessions(t, rawConn(t), name, false)) == 1 })
	start := time.Now()
	cmd.Process.Kill()
	if err := <-got; err != nil {
		t.Fatalf("lock of a killed holder never came free: %v", err)
	}
	defer l.Release()
	t.Logf("lock taken %s after the holder was killed", time.Since(start).Round(time.Millisecond))
	if l.Token() <= old {
		t.Errorf("token %d after the killed holder's %d", l.Token(), old)
	}
}

// TestTerminatedHolderIsLost: pg_terminate_backend on a holder's session
// frees the lock and closes the holder's Lost channel at once; Do's context
// is cancelled, and Release reports ErrLost.
func TestTerminatedHolderIsLost(t *testing.T) {
	p := dial(t)
	raw := rawConn(t)
	name := uniqueName(t)
	var lostAfter time.Duration
	err := hold.Do(ctxFor(t, hangLimit), "", func(ctx context.Context) error {
		pids := sessions(t, raw, name, true)
		if len(pids) != 1 {
			t.Fatalf("holder sessions %v, want one", pids)
		}
		start := time.Now()
		if _, err := raw.Exec(context.Background(), `SELECT pg_terminate_backend($1)`, pids[0]); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			lostAfter = time.Since(start)
		case <-time.After(hangLimit):
			t.Fatal("Do's context not cancelled after its session was terminated")
		}
		if cause := context.Cause(ctx); !errors.Is(cause, hold.ErrLost) {
			t.Errorf("Do's context cause = %v, want ErrLost", cause)
		}
		return nil
	}, lockOpts(p, name)...)
	if !errors.Is(err, hold.ErrLost) {
		t.Fatalf("Do = %v, want ErrLost from Release", err)
	}
	t.Logf("Lost fired %s after pg_terminate_backend", lostAfter.Round(time.Microsecond))
	if !strings.Contains(err.Error(), "terminated") {
		t.Errorf("the ErrLost does not say the session was terminated: %v", err)
	}
	// The lock is free once the server has ended the session (Lost fires
	// on the termination notice, which comes before the end), and the
	// protocol works on.
	eventually(t, "the terminated session's lock freed", func() bool { return len(sessions(t, raw, name, true)) == 0 })
	l, err := hold.TryAcquire("", lockOpts(p, name)...)
	if err != nil {
		t.Fatalf("TryAcquire after the holder was terminated: %v", err)
	}
	l.Release()
}

// TestCancelWhileWaiting: a wait whose context ends returns at once, leaves
// the server's queue, and never leaves the lock held, also when the lock
// comes free just as the context ends.
func TestCancelWhileWaiting(t *testing.T) {
	p := dial(t)
	raw := rawConn(t)
	name := uniqueName(t)
	l, err := hold.Acquire(ctxFor(t, hangLimit), "", lockOpts(p, name)...)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = hold.Acquire(ctxFor(t, 200*time.Millisecond), "", lockOpts(p, name)...)
	if !errors.Is(err, hold.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire with a deadline while held = %v, want ErrTimeout", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancelled wait returned after %s", d)
	}
	eventually(t, "cancelled waiter left the queue", func() bool { return len(sessions(t, raw, name, false)) == 0 })
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	if _, err := hold.Acquire(ctx, "", lockOpts(p, name)...); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire cancelled while waiting = %v, want context.Canceled", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	// Releases racing cancellations: whoever wins, the lock ends up free.
	for i := range 10 {
		h, err := hold.Acquire(ctxFor(t, hangLimit), "", lockOpts(p, name)...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan *hold.Lock, 1)
		go func() {
			w, err := hold.Acquire(ctx, "", lockOpts(p, name)...)
			if err != nil {
				w = nil
			}
			done <- w
		}()
		eventually(t, "waiter queued", func() bool { return len(sessions(t, raw, name, false)) == 1 })
		go h.Release()
		time.Sleep(time.Duration(i*50) * time.Microsecond)
		cancel()
		if w := <-done; w != nil {
			w.Release()
		}
		eventually(t, "lock free after a cancelled wait", func() bool {
			return len(sessions(t, raw, name, true))+len(sessions(t, raw, name, false)) == 0
		})
	}
}

// TestServerRestart: a restart ends every session: the holder's Lost
// fires, Release reports ErrLost, the protocol reconnects, and tokens keep
// growing across the restart.
func TestServerRestart(t *testing.T) {
	s := needServer(t)
	p := dial(t)
	name := uniqueName(t)
	l, err := hold.Acquire(ctxFor(t, hangLimit), "", lockOpts(p, name)...)
	if err != nil {
		t.Fatal(err)
	}
	lost := l.Lost()
	idle, err := hold.Acquire(ctxFor(t, hangLimit), "", lockOpts(p, name+"-other")...)
	if err != nil {
		t.Fatal(err)
	}
	idle.Release() // leaves an idle session in the protocol's pool
	// A waiter rides through the restart: it reconnects and waits
	// again, and gets the lock the restart freed, within its context.
	var notices atomic.Int32
	wp := dial(t, postgres.WithOutageNotice(func(msg string) { notices.Add(1); t.Log("notice: ", msg) }))
	waited := make(chan error, 1)
	var waiterToken uint64
	go func() {
		w, err := hold.Acquire(ctxFor(t, 60*time.Second), "", lockOpts(wp, name)...)
		if err == nil {
			waiterToken = w.Token()
			err = w.Release()
		}
		waited <- err
	}()
	raw := rawConn(t)
	eventually(t, "waiter queued", func() bool { return len(sessions(t, raw, name, false)) == 1 })
	raw.Close(context.Background())
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("waiter across a restart: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("waiter still waiting 60s after the restart")
	}
	if notices.Load() != 1 {
		t.Errorf("the waiter gave %d outage notices, want 1", notices.Load())
	}
	select {
	case <-lost:
	case <-time.After(hangLimit):
		t.Fatal("Lost not closed after a server restart")
	}
	if err := l.Release(); !errors.Is(err, hold.ErrLost) {
		t.Fatalf("Release after a restart = %v, want ErrLost", err)
	}
	l2, err := hold.Acquire(ctxFor(t, hangLimit), "", lockOpts(p, name)...)
	if err != nil {
		t.Fatalf("Acquire after a restart (idle session gone): %v", err)
	}
	defer l2.Release()
	if l2.Token() <= waiterToken || waiterToken <= l.Token() || l2.Token() <= idle.Token() {
		t.Errorf("token %d after a restart, before it %d and %d", l2.Token(), l.Token(), idle.Token())
	}
}

// TestBreak: break refuses a live session's lock; with force it ends that
// session, and the holder finds its lock lost.
func TestBreak(t *testing.T) {
	p := dial(t)
	name := uniqueName(t)
	if st, err := p.Break(name, false); err != nil || st.State != hold.Free {
		t.Fatalf("Break of a free lock = %+v, %v", st, err)
	}
	l, err := hold.Acquire(ctxFor(t, hangLimit), "", lockOpts(p, name)...)
	if err != nil {
		t.Fatal(err)
	}
	lost := l.Lost()
	if _, err := hold.Break("", false, lockOpts(p, name)...); !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("Break without force = %v, want ErrBusy", err)
	}
	if err := l.Check(); err != nil {
		t.Fatalf("refused break hurt the holder: %v", err)
	}
	st, err := hold.Break("", true, lockOpts(p, name)...)
	if err != nil {
		t.Fatalf("Break with force: %v", err)
	}
	if st.Holder == nil || st.Holder.Owner == nil || st.Holder.Owner.PID != os.Getpid() {
		t.Errorf("Break reported holder %v, want this process", st.Holder)
	}
	select {
	case <-lost:
	case <-time.After(hangLimit):
		t.Fatal("holder's Lost not closed after a forced break")
	}
	if err := l.Release(); !errors.Is(err, hold.ErrLost) {
		t.Fatalf("Release after a forced break = %v, want ErrLost", err)
	}
}

// TestLocks lists the recorded locks with their state.
func TestLocks(t *testing.T) {
	p := dial(t)
	name := uniqueName(t)
	l, err := hold.Acquire(ctxFor(t, hangLimit), "", lockOpts(p, name+"-held")...)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	l2, err := hold.Acquire(ctxFor(t, hangLimit), "", lockOpts(p, name+"-free")...)
	if err != nil {
		t.Fatal(err)
	}
	l2.Release()
	all, err := p.Locks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, st := range all {
		switch st.Path {
		case name + "-held":
			found++
			if st.State != hold.HeldExclusive || st.Fence != l.Token() || st.Holder.Owner.PID != os.Getpid() {
				t.Errorf("held lock listed as %+v", st)
			}
		case name + "-free":
			found++
			if st.State != hold.Free || st.Fence != l2.Token() {
				t.Errorf("free lock listed as %+v", st)
			}
		}
	}
	if found != 2 {
		t.Errorf("Locks found %d of the 2 locks: %v", found, all)
	}
}

// TestUpdateGuardedByPostgres: hold.Update works with a PostgreSQL lock
// guarding the file.
func TestUpdateGuardedByPostgres(t *testing.T) {
	p := dial(t)
	target := filepath.Join(t.TempDir(), "state")
	for range 3 {
		err := hold.Update(ctxFor(t, hangLimit), target, func(old []byte) ([]byte, error) {
			return append(old, 'x'), nil
		}, lockOpts(p, uniqueName(t))...)
		if err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "xxx" {
		t.Fatalf("file after 3 updates = %q", b)
	}
}

// TestKeyCollision: a name whose key is recorded for another name is
// refused, and the lock is not left held.
func TestKeyCollision(t *testing.T) {
	p := dial(t)
	raw := rawConn(t)
	name := uniqueName(t)
	// Make sure the table exists, then forge a row: another name on our key.
	l, err := hold.Acquire(ctxFor(t, hangLimit), "", lockOpts(p, uniqueName(t)+"-warmup")...)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if _, err := raw.Exec(context.Background(), `INSERT INTO hold_locks (key, name, fence) VALUES ($1, 'someone-else', 1)`, postgres.Key(name)); err != nil {
		t.Fatal(err)
	}
	_, err = hold.Acquire(ctxFor(t, hangLimit), "", lockOpts(p, name)...)
	if !errors.Is(err, hold.ErrInvalidName) || !strings.Contains(err.Error(), "someone-else") {
		t.Fatalf("Acquire of a colliding name = %v, want ErrInvalidName naming the other lock", err)
	}
	eventually(t, "colliding lock freed", func() bool { return len(sessions(t, raw, name, true)) == 0 })
}

// TestBadAddressesAndNames: malformed addresses and names fail clearly,
// an unreachable server fails fast, and passwords never show.
func TestBadAddressesAndNames(t *testing.T) {
	for _, addr := range []string{
		"postgres://u:s3cret@host:5432/db",       // no lock name
		"postgres://u:s3cret@host:5432/db#",      // empty lock name
		"mysql://u:s3cret@host/db#x",             // another scheme
		"postgres://u:s3cret@host:5432/db#a%01b", // control character
		"postgres://u:s3cret@host:5432/db#a%zzb", // bad escape
		"postgres://u:s3cret@host:5432/db#" + strings.Repeat("n", 600),
	} {
		_, _, err := postgres.ParseAddress(addr)
		if err == nil {
			t.Errorf("ParseAddress(%.60q) succeeded", addr)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error shows the password: %v", err)
		}
	}
	conn, name, err := postgres.ParseAddress("postgresql://u@h:1/db?sslmode=disable#locks/deploy%20x")
	if err != nil || conn != "postgresql://u@h:1/db?sslmode=disable" || name != "locks/deploy x" {
		t.Errorf("ParseAddress = %q, %q, %v", conn, name, err)
	}

	// Nothing listens on this port.
	start := time.Now()
	_, err = postgres.Dial(ctxFor(t, hangLimit), "postgres://u:s3cret@127.0.0.1:1/db?sslmode=disable&connect_timeout=5")
	if !errors.Is(err, postgres.ErrUnreachable) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Dial of a closed port = %v, want ErrUnreachable without the password", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Dial of a closed port took %s", d)
	}
	if _, err := postgres.Dial(ctxFor(t, hangLimit), "postgres://u@h:1/db?sslmode=bogus"); err == nil {
		t.Error("Dial with sslmode=bogus succeeded")
	}
	if s := needServer(t); s != nil {
		_, err := postgres.Dial(ctxFor(t, hangLimit), s.URL("no_such_db"))
		if err == nil || !strings.Contains(err.Error(), "no_such_db") {
			t.Errorf("Dial of a missing database = %v, want an error naming it", err)
		}
	}
	p := dial(t)
	for _, bad := range []string{"a\x01b", strings.Repeat("n", 600), "bad\xffutf8"} {
		if _, err := hold.TryAcquire("", lockOpts(p, bad)...); !errors.Is(err, hold.ErrInvalidName) {
			t.Errorf("TryAcquire(%.20q) = %v, want ErrInvalidName", bad, err)
		}
	}
}

// TestForeignHolder: a session that took the advisory lock by hand (no
// owner record) excludes hold's acquisitions, shows as a holder without a
// record, and Break refuses it unless forced.
func TestForeignHolder(t *testing.T) {
	p := dial(t)
	raw := rawConn(t)
	name := uniqueName(t)
	if _, err := raw.Exec(context.Background(), `SELECT pg_advisory_lock($1)`, postgres.Key(name)); err != nil {
		t.Fatal(err)
	}
	_, err := hold.TryAcquire("", lockOpts(p, name)...)
	if !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("TryAcquire while a foreign session holds = %v, want ErrBusy", err)
	}
	st, err := hold.Inspect("", lockOpts(p, name)...)
	if err != nil || st.State != hold.HeldExclusive || st.Holder == nil || st.Holder.Owner != nil {
		t.Fatalf("Inspect = %+v, %v; want held, holder without a record", st, err)
	}
	if _, err := p.Break(name, false); !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("Break without force = %v, want ErrBusy", err)
	}
	if _, err := raw.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, postgres.Key(name)); err != nil {
		t.Fatal(err)
	}
	l, err := hold.TryAcquire("", lockOpts(p, name)...)
	if err != nil {
		t.Fatalf("TryAcquire after the foreign session unlocked: %v", err)
	}
	l.Release()
}

// TestConnectionKeywords: libpq's socket keywords in an address set up
// the client's socket, as with psql, instead of reaching the server as
// settings it refuses; idle_session_timeout sets the session bound; a bad
// value is a clear error.
func TestConnectionKeywords(t *testing.T) {
	s := needServer(t)
	ctx := ctxFor(t, hangLimit)
	for _, q := range []string{"keepalives_idle=5&keepalives_interval=2&keepalives_count=3", "keepalives=0", "tcp_user_timeout=10000"} {
		p, err := postgres.Dial(ctx, s.ConnString()+"&"+q)
		if err != nil {
			t.Errorf("Dial with %s: %v", q, err)
			continue
		}
		l, err := hold.Acquire(ctx, "", lockOpts(p, uniqueName(t))...)
		if err != nil {
			t.Errorf("Acquire with %s: %v", q, err)
		} else {
			l.Release()
		}
		p.Close()
	}
	p, err := postgres.Dial(ctx, s.ConnString()+"&idle_session_timeout=30000")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if b := p.SessionBound(); b != 30*time.Second {
		t.Errorf("SessionBound with idle_session_timeout=30000 = %s, want 30s", b)
	}
	if b := dial(t).SessionBound(); b != postgres.DefaultSessionTimeout {
		t.Errorf("default SessionBound = %s, want %s", b, postgres.DefaultSessionTimeout)
	}
	if _, err := postgres.Dial(ctx, s.ConnString()+"&keepalives_idle=soon"); err == nil || !strings.Contains(err.Error(), "keepalives_idle") {
		t.Errorf("Dial with keepalives_idle=soon = %v, want an error naming it", err)
	}
	if _, err := postgres.Dial(ctx, s.ConnString()+"&idle_session_timeout=0"); err == nil {
		t.Error("Dial with idle_session_timeout=0 succeeded; it turns off the bound")
	}
}
