package postgres_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/cycletest"
	"github.com/hold-dev/hold/postgres"
)

// Deadlocks between processes on PostgreSQL (postgres/waits.go and
// internal/deadlock/remote.go): workers that take locks in opposite orders.

func init() {
	workers = append(workers, func() (int, bool) {
		return cycletest.RunWorker(func() (hold.Protocol, func(), error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			p, err := postgres.Dial(ctx, os.Getenv(envConn))
			if err != nil {
				return nil, nil, err
			}
			return p, func() { p.Close() }, nil
		})
	})
}

// TestDeadlockCycle: two- and three-process cycles end with exactly one
// ErrDeadlock naming them; the others get their locks.
func TestDeadlockCycle(t *testing.T) {
	s := needServer(t)
	cycletest.Cycles(t, func(t *testing.T) string { return uniqueName(t) }, envConn+"="+s.ConnString())
}

// TestDeadlockGlobalOrder: workers that take random locks in one order,
// with waits longer than DeadlockAfter, never report a deadlock.
func TestDeadlockGlobalOrder(t *testing.T) {
	s := needServer(t)
	cycletest.GlobalOrder(t, uniqueName(t), envConn+"="+s.ConnString())
}

// TestDeadlockPlantedByOtherRole: another role, which may use hold's
// tables, holds the lock this process waits for in one session and waits
// for the lock this process holds in another, and says so in a row of
// hold_waits (as itself; the row's role cannot name another). The wait
// never reports a deadlock; the same sessions and row of this role do.
func TestDeadlockPlantedByOtherRole(t *testing.T) {
	s := needServer(t)
	p := dial(t)
	admin := rawConn(t)
	ctx := context.Background()
	if _, err := admin.Exec(ctx, postgres.Schema); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`DO $$ BEGIN CREATE ROLE mallory LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON hold_locks, hold_holders, hold_waits TO mallory`,
		`GRANT USAGE ON SEQUENCE hold_locks_fence TO mallory`,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	base := uniqueName(t)
	for _, c := range []struct {
		by      string
		planted bool // by another role: no report
	}{{"mallory", true}, {"hold", false}} {
		t.Run(c.by, func(t *testing.T) {
			l1, l2 := base+"-"+c.by+"-1", base+"-"+c.by+"-2"
			cycletest.WaitPlanted(t, p, l1, l2, func() { plantWait(t, s.URLAs(c.by, "postgres"), l2, l1) }, !c.planted)
		})
	}
}

// plantWait connects twice to url: one session holds the advisory lock of
// holds, the other waits for that of waits, and a row of hold_waits says
// so, naming the first session as holding for the second's process; one
// more row tries to pass for the test's own role's, which the table
// refuses.
func plantWait(t *testing.T, url, holds, waits string) {
	t.Helper()
	ctx := context.Background()
	connect := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	holder, waiter := connect(), connect()
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_lock($1)`, postgres.Key(holds)); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := waiter.Exec(wctx, `SELECT pg_advisory_lock($1)`, postgres.Key(waits))
		waited <- err
	}()
	t.Cleanup(func() { cancel(); <-waited })
	writer := connect()
	var waiting bool
	for !waiting {
		if err := writer.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)`,
			int32(waiter.PgConn().PID())).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	record := `{"pid":1,"host":"elsewhere","started_at":"2026-01-01T00:00:00Z","released":false,"protocol":"postgres"}`
	if _, err := writer.Exec(ctx, `INSERT INTO hold_waits (backend_pid, backend_start, key, name, owner, holds)
		SELECT pid, backend_start, $2, $3, $4, ARRAY[$5::integer] FROM pg_stat_activity WHERE pid = $1`,
		int32(waiter.PgConn().PID()), postgres.Key(waits), waits, record, int32(holder.PgConn().PID())); err != nil {
		t.Fatal(err)
	}
	_, err := writer.Exec(ctx, `UPDATE hold_waits SET role = 'hold' WHERE backend_pid = $1`, int32(waiter.PgConn().PID()))
	t.Logf("passing the row for the role hold's: %v", err)
}

// TestDeadlockSessionEnded: a waiter of a cycle whose waiting session is
// ended (pg_terminate_backend) before its search begins waits again on a
// new session; its entry must name the new one, or no search could see
// the cycle.
func TestDeadlockSessionEnded(t *testing.T) {
	s := needServer(t)
	base := uniqueName(t)
	l0, l1 := base+"-l0", base+"-l1"
	admin := rawConn(t)
	done, exited := make(chan struct{}), make(chan struct{})
	defer func() {
		close(done)
		<-exited // before admin is closed
	}()
	go func() {
		defer close(exited)
		// Once both wait, end one waiting session.
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var ended int
			if admin.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM (
				SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
				AND objid::bigint = $1 & 4294967295 AND classid::bigint = ($1 >> 32) & 4294967295
				AND (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
					AND objid::bigint = $2 & 4294967295 AND classid::bigint = ($2 >> 32) & 4294967295) = 1) AS w`,
				postgres.Key(l0), postgres.Key(l1)).Scan(&ended) == nil && ended == 1 {
				return
			}
		}
	}()
	// The delay leaves the termination time to come first, even on a
	// loaded machine.
	res, took := cycletest.Cycle(t, [][]string{{l1, l0}, {l0, l1}}, 5*time.Second, envConn+"="+s.ConnString())
	t.Logf("the cycle ended in %v", took)
	cycletest.CheckOneDeadlock(t, res, []string{l0, l1})
}

// TestDeadlockReaderBehindWriter: a cycle through a reader queued behind
// a waiting writer (the server queues a shared request behind an
// exclusive one) ends with exactly one ErrDeadlock. Before readers had
// that edge, the chain ended at the queued reader and all three hung.
func TestDeadlockReaderBehindWriter(t *testing.T) {
	s := needServer(t)
	cycletest.ReaderBehindWriter(t, uniqueName(t), envConn+"="+s.ConnString())
}

// TestDeadlockBoundedLink: a two-process cycle whose one wait has a
// deadline is no deadlock: that wait times out, the other gets its lock,
// and nobody reports one.
func TestDeadlockBoundedLink(t *testing.T) {
	s := needServer(t)
	cycletest.BoundedLink(t, uniqueName(t), envConn+"="+s.ConnString())
}

// TestDeadlockOtherRoleCannotHide: another role with exactly the grants
// docs/postgres.md asks for deletes every row of hold_waits, and rewrites
// every row as its own, over and over, while two processes of the role
// hold close a true cycle: it touches no row of theirs (row-level
// security), and the cycle is reported. Before, its DELETE and UPDATE
// hid the cycle, which then hung.
func TestDeadlockOtherRoleCannotHide(t *testing.T) {
	s := needServer(t)
	admin := rawConn(t)
	ctx := context.Background()
	if _, err := admin.Exec(ctx, postgres.Schema); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		`DO $$ BEGIN CREATE ROLE eve LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$`,
		`GRANT SELECT, INSERT, UPDATE ON hold_locks TO eve`,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON hold_holders, hold_waits TO eve`,
		`GRANT USAGE ON SEQUENCE hold_locks_fence TO eve`,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	eve, err := pgx.Connect(ctx, s.URLAs("eve", "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer eve.Close(context.Background())
	stop, stopped := make(chan struct{}), make(chan error, 1)
	go func() {
		var touched int64
		for {
			select {
			case <-stop:
				if touched > 0 {
					stopped <- fmt.Errorf("the other role deleted or changed %d rows of hold_waits", touched)
				}
				stopped <- nil
				return
			case <-time.After(5 * time.Millisecond):
			}
			for _, sql := range []string{`DELETE FROM hold_waits`, `UPDATE hold_waits SET role = current_user`} {
				tag, err := eve.Exec(ctx, sql)
				if err != nil {
					stopped <- fmt.Errorf("%s: %w", sql, err)
					<-stop
					return
				}
				touched += tag.RowsAffected()
			}
		}
	}()
	base := uniqueName(t)
	res, took := cycletest.Cycle(t, [][]string{{base + "-l0", base + "-l1"}, {base + "-l1", base + "-l0"}}, 200*time.Millisecond, envConn+"="+s.ConnString())
	close(stop)
	if err := <-stopped; err != nil {
		t.Error(err)
	}
	t.Logf("the cycle ended in %v", took)
	cycletest.CheckOneDeadlock(t, res, []string{base + "-l0", base + "-l1"})
}

// TestDeadlockWaitsMigrated: a hold_waits made by an older hold (no
// column deadline, no row-level security) is brought up to date by the
// first wait that publishes itself, when its role owns the table, and a
// cycle is then reported as on a new one.
func TestDeadlockWaitsMigrated(t *testing.T) {
	s := needServer(t)
	admin := rawConn(t)
	ctx := context.Background()
	if _, err := admin.Exec(ctx, postgres.Schema); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `DROP TABLE hold_waits; CREATE UNLOGGED TABLE hold_waits (
	backend_pid integer NOT NULL,
	backend_start timestamptz NOT NULL,
	key bigint NOT NULL,
	name text NOT NULL,
	owner text NOT NULL,
	holds integer[] NOT NULL,
	published timestamptz NOT NULL DEFAULT now(),
	role name NOT NULL DEFAULT current_user CHECK (role = current_user),
	PRIMARY KEY (backend_pid, backend_start))`); err != nil {
		t.Fatal(err)
	}
	base := uniqueName(t)
	res, _ := cycletest.Cycle(t, [][]string{{base + "-l0", base + "-l1"}, {base + "-l1", base + "-l0"}}, 200*time.Millisecond, envConn+"="+s.ConnString())
	cycletest.CheckOneDeadlock(t, res, []string{base + "-l0", base + "-l1"})
	var secured bool
	if err := admin.QueryRow(ctx, `SELECT relrowsecurity AND relforcerowsecurity FROM pg_class WHERE oid = 'hold_waits'::regclass`).Scan(&secured); err != nil {
		t.Fatal(err)
	}
	if !secured {
		t.Error("hold_waits has no forced row-level security after the migration")
	}
}

// TestTimeoutNamesLiveHolder: the holder a timed-out wait names is one
// that holds the lock now. A lock free by the time the wait ends names
// none (before, it named its last exclusive holder, which may have been
// gone for long: "held by pid 7061 … for 22.7s"); a lock held shared
// names a reader with a record before a session whose record is not
// written yet (a reader whose statement still runs).
func TestTimeoutNamesLiveHolder(t *testing.T) {
	p := dial(t)
	name := uniqueName(t)
	ctx := context.Background()
	l, err := hold.Acquire(ctx, "", hold.WithProtocol(p), hold.LockFile(name), hold.Field("who", "writer"))
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if e := postgres.BusyError(p, name); e.Holder != nil {
		t.Errorf("a free lock: the error names %v, the writer that let go", e.Holder)
	}
	raw := rawConn(t)
	if _, err := raw.Exec(ctx, `SELECT pg_advisory_lock_shared($1)`, postgres.Key(name)); err != nil {
		t.Fatal(err)
	}
	r, err := hold.Acquire(ctx, "", hold.WithProtocol(p), hold.LockFile(name), hold.Shared(), hold.Field("who", "reader"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	e := postgres.BusyError(p, name)
	if e.Holder == nil || e.Holder.Owner == nil || e.Holder.Owner.Fields["who"] != "reader" {
		t.Errorf("a lock held shared: the error names %v (%s), want the reader", e.Holder, e)
	}
}

// TestDeadlockRandom: random near rings (one wait with a deadline, or a
// holder that lets go) are never reported, and random true rings of 2 to
// 4 processes are, once each (cycletest.Random; HOLD_TEST_LONG=1 for 200
// and 50).
func TestDeadlockRandom(t *testing.T) {
	s := needServer(t)
	near, true_ := cycletest.RandomCounts(6, 4)
	cycletest.Random(t, uniqueName(t), near, true_, envConn+"="+s.ConnString())
}
