package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hold-dev/hold/lock"
)

var _ lock.WaitGraph = (*Protocol)(nil)

// Deadlocks between processes (lock.WaitGraph). The server knows who
// waits for which advisory lock and who holds it (pg_locks), but not
// which client process a session is: hold keeps one session per lock, so
// a process that holds A and waits for B has two sessions, and the cycle
// runs through the client, where PostgreSQL's own detector cannot see it.
// So a waiter that has waited DeadlockAfter writes one row of
// hold_waits, from another session of its own: its waiting session (pid
// and start, so that a reused pid is not taken for it), the lock it waits
// for, its owner record, and the sessions of the held locks the wait
// keeps (those its process cannot let go before the wait ends). pg_locks stays the word on who waits and who
// holds: a row whose session no longer waits for its lock (the wait
// ended, the waiter crashed and its session with it) is a leftover,
// never listed, and the next publication removes it.
//
// Only rows of the reader's own role are taken, and only for sessions of
// that role: the table's role column is always the role that wrote the
// row (its CHECK), so a row another role planted is never read, and a
// session it names must be one pg_stat_activity shows as this role's. A
// session the row says holds for the waiter counts only if it started
// before the row was written: a pid reused since is someone else's.

// waitsSchema is the table of the published waits (part of Schema), and
// what keeps one role's rows out of another's hands: row-level security,
// forced on the table's owner too, lets every role read every row but
// insert, change and delete only rows of its own (the column role, which
// is always the role that wrote the row). The grants alone (DELETE and
// UPDATE on the table, which every user of hold needs for its own rows)
// would let any role delete or rewrite another's, and so hide a true
// cycle. A superuser, or a role with BYPASSRLS, is not bound; nor, as
// for every lock, is anyone who may end another's sessions.
//
// A table of an older hold, without the column deadline, is brought up
// to date (waitsMigrateSQL) by the first waiter that finds it so, when
// its role owns the table; otherwise its owner must run Schema again.
const waitsSchema = `CREATE UNLOGGED TABLE IF NOT EXISTS hold_waits (
	backend_pid integer NOT NULL,
	backend_start timestamptz NOT NULL,
	key bigint NOT NULL,
	name text NOT NULL,
	owner text NOT NULL,
	holds integer[] NOT NULL,
	published timestamptz NOT NULL DEFAULT now(),
	role name NOT NULL DEFAULT current_user CHECK (role = current_user),
	deadline timestamptz,
	PRIMARY KEY (backend_pid, backend_start)
);
` + waitsMigrateSQL

// waitsMigrateSQL brings a table of the published waits made by an older
// hold up to date: the column deadline, and the row-level security that
// keeps each role's rows its own (see waitsSchema). It may be run again.
const waitsMigrateSQL = `ALTER TABLE hold_waits ADD COLUMN IF NOT EXISTS deadline timestamptz;
ALTER TABLE hold_waits ENABLE ROW LEVEL SECURITY;
ALTER TABLE hold_waits FORCE ROW LEVEL SECURITY;
DO $hold$ BEGIN
	CREATE POLICY hold_waits_read ON hold_waits FOR SELECT USING (true);
	CREATE POLICY hold_waits_own ON hold_waits FOR ALL USING (role = current_user) WITH CHECK (role = current_user);
EXCEPTION WHEN duplicate_object THEN NULL;
END $hold$;`

// publishSQL writes the row of the wait of session $1 for the lock $2
// (named $3) by the owner $4, whose process holds through sessions $5,
// which gives up by itself at $6 (NULL: never), and removes this role's
// leftovers, in one statement. It returns the waiting session's start,
// which the removal names.
const publishSQL = `WITH gone AS (
		DELETE FROM hold_waits w WHERE w.role = current_user AND NOT EXISTS (
			SELECT 1 FROM pg_stat_activity a WHERE a.pid = w.backend_pid AND a.backend_start = w.backend_start)
	)
	INSERT INTO hold_waits (backend_pid, backend_start, key, name, owner, holds, deadline)
	SELECT a.pid, a.backend_start, $2, $3, $4, $5::integer[], $6::timestamptz FROM pg_stat_activity a
	WHERE a.pid = $1 AND a.usename = session_user AND a.backend_start IS NOT NULL
	ON CONFLICT (backend_pid, backend_start) DO UPDATE SET key = excluded.key, name = excluded.name,
		owner = excluded.owner, holds = excluded.holds, deadline = excluded.deadline, published = now(), role = current_user
	RETURNING backend_start`

// unpublishSQL removes the row of one wait.
const unpublishSQL = `DELETE FROM hold_waits WHERE backend_pid = $1 AND backend_start = $2 AND role = current_user`

// waitsSQL lists this role's waits that still wait, each with the
// sessions it waits for, the sessions that stand for its process, its
// deadline (microseconds since the epoch, NULL for none) and whether it
// waits to share the lock. Order is
// when the waiting statement began, by the server's clock.
//
// A wait waits for the sessions holding its lock in a mode it conflicts
// with (any, for an exclusive waiter; exclusive ones, for a shared
// waiter). A shared waiter whose lock no session holds exclusively waits
// behind an exclusive waiter queued ahead of it (the server queues a
// reader behind a waiting writer): it waits for that session, as
// pg_blocking_pids says, which the writer's own wait stands for (its
// waiting session is its Place).
const waitsSQL = `SELECT w.backend_pid, w.name, w.owner,
		(extract(epoch FROM a.query_start) * 1000000)::bigint,
		CASE WHEN cardinality(h.pids) > 0 OR q.mode = 'ExclusiveLock' THEN h.pids
			ELSE coalesce((SELECT array_agg(b::text) FROM unnest(pg_blocking_pids(w.backend_pid)) AS b), '{}') END,
		coalesce((SELECT array_agg(s.pid::text) FROM unnest(w.holds) AS x
			JOIN pg_stat_activity s ON s.pid = x AND s.usename = session_user AND s.backend_start < w.published), '{}'),
		(extract(epoch FROM w.deadline) * 1000000)::bigint, q.mode = 'ShareLock'
	FROM hold_waits w
	JOIN pg_stat_activity a ON a.pid = w.backend_pid AND a.backend_start = w.backend_start AND a.usename = session_user
	JOIN pg_locks q ON q.pid = w.backend_pid AND q.locktype = 'advisory' AND NOT q.granted AND q.objsubid = 1
		AND q.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		AND q.classid::bigint = (w.key >> 32) & 4294967295 AND q.objid::bigint = w.key & 4294967295
	CROSS JOIN LATERAL (SELECT coalesce((SELECT array_agg(l.pid::text) FROM pg_locks l
			WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.database = q.database
			AND l.classid = q.classid AND l.objid = q.objid
			AND (q.mode = 'ExclusiveLock' OR l.mode = 'ExclusiveLock')), '{}') AS pids) AS h
	WHERE w.role = current_user`

// watching starts the request's deadlock watch, if any, for the wait of
// session c for the lock name (key), and returns the context the wait is
// to use.
func (p *Protocol) watching(ctx context.Context, req *lock.Request, c *conn, name string, key int64, owner []byte) context.Context {
	backend := c.c.PgConn().PID()
	var deadline *time.Time
	if d, ok := ctx.Deadline(); ok {
		deadline = &d
	}
	return lock.WatchServerWait(ctx, req.Watch, func(ctx context.Context, keeps []lock.Handle) (string, func(), error) {
		sessions := []int32{} // not NULL: a writer's wait may keep nothing
		for _, k := range keeps {
			if h := p.own(k); h != nil {
				sessions = append(sessions, h.backend)
			}
		}
		return p.publishWait(ctx, backend, name, key, owner, sessions, deadline)
	})
}

// own returns k's handle if it is a lock of p's, nil otherwise.
func (p *Protocol) own(k lock.Handle) *handle {
	h, _ := k.(*handle)
	if s, ok := k.(*slotHandle); ok {
		h = s.handle
	}
	if h == nil || h.p != p {
		return nil
	}
	return h
}

// publishWait writes the row of the wait of session backend, which keeps
// the locks of the sessions holds, and returns its ID among ServerWaits'
// and the function that removes it.
func (p *Protocol) publishWait(ctx context.Context, backend uint32, name string, key int64, owner []byte, holds []int32, deadline *time.Time) (string, func(), error) {
	var start time.Time
	for created, migrated := false, false; ; {
		c, _, err := p.get(ctx)
		if err != nil {
			return "", nil, err
		}
		rctx, cancel := p.rpc(ctx)
		err = c.c.QueryRow(rctx, publishSQL, c.mode(publishSQL), int32(backend), key, name, string(owner), holds, deadline).Scan(&start)
		cancel()
		if err == nil {
			p.put(c)
			break
		}
		c.close()
		var pgErr *pgconn.PgError
		switch {
		case !errors.As(err, &pgErr):
			return "", nil, err
		case pgErr.Code == "42P01" && !created:
			// A database whose schema came before hold_waits: add it.
			if err := p.createSchema(ctx); err != nil {
				return "", nil, err
			}
			created = true
		case pgErr.Code == "42703" && !migrated:
			// An older hold's table, without deadline (nor row-level
			// security): bring it up to date, if this role owns it.
			if err := p.migrateWaits(ctx); err != nil {
				return "", nil, err
			}
			migrated = true
		default:
			return "", nil, err
		}
	}
	remove := func() {
		ctx, cancel := p.rpc(context.Background())
		defer cancel()
		c, _, err := p.get(ctx)
		if err != nil {
			return // a leftover, which no reader takes
		}
		if _, err := c.c.Exec(ctx, unpublishSQL, int32(backend), start); err != nil {
			c.close()
			return
		}
		p.put(c)
	}
	return strconv.FormatUint(uint64(backend), 10), remove, nil
}

// ServerWaits lists the published waits of this role that still wait, in
// one query (see waitsSQL).
func (p *Protocol) ServerWaits(ctx context.Context) ([]lock.ServerWait, error) {
	c, _, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	rctx, cancel := p.rpc(ctx)
	defer cancel()
	rows, err := c.c.Query(rctx, waitsSQL, c.mode(waitsSQL))
	if err != nil {
		c.close()
		return nil, err
	}
	var out []lock.ServerWait
	for rows.Next() {
		var backend int32
		var name, owner string
		var since int64
		var blockers, holds []string
		var deadline *int64
		var shared bool
		if err := rows.Scan(&backend, &name, &owner, &since, &blockers, &holds, &deadline, &shared); err != nil {
			rows.Close()
			c.close()
			return nil, err
		}
		w := lock.ServerWait{ID: strconv.Itoa(int(backend)), Path: name, Order: since, Blockers: blockers, Holds: holds,
			Place: strconv.Itoa(int(backend)), Shared: shared}
		if deadline != nil {
			w.Deadline = time.UnixMicro(*deadline)
		}
		if o, ok := lock.DecodeOwner([]byte(owner)); ok {
			w.Waiter = *o
		}
		out = append(out, w)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		c.close()
		return nil, fmt.Errorf("reading the published waits: %w", err)
	}
	p.put(c)
	return out, nil
}

// migrateWaits brings an older hold's table of published waits up to date
// (waitsMigrateSQL), serialized as createSchema is.
func (p *Protocol) migrateWaits(ctx context.Context) error {
	c, _, err := p.get(ctx)
	if err != nil {
		return err
	}
	rctx, cancel := p.rpc(ctx)
	defer cancel()
	sql := fmt.Sprintf("SELECT pg_advisory_xact_lock(%d);\n%s", schemaLockKey, waitsMigrateSQL)
	if err := c.c.PgConn().Exec(rctx, sql).Close(); err != nil {
		c.close()
		e := p.queryError("acquire", "hold_waits", err).(*lock.Error)
		e.Hint = "the table hold_waits was made by an older hold: have its owner run the postgres package's Schema again (docs/postgres.md), which adds the column deadline and the row-level security that keeps each role's waits its own"
		return e
	}
	p.put(c)
	return nil
}
