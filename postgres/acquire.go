package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hold-dev/hold/lock"
)

// Schema creates what the protocol keeps in the database: the sequence
// that hands out fencing tokens and the table of lock names and owner
// records. The protocol runs it itself the first time it finds the table
// missing; a database where its user may not create tables needs it run
// once by someone who may (then grant the user SELECT, INSERT and UPDATE on
// hold_locks, SELECT, INSERT, UPDATE and DELETE on hold_holders and
// hold_waits, and USAGE on hold_locks_fence).
//
// hold_locks has one row per lock name: its last token and the record of
// its exclusive holder. hold_holders has the records of the holders a lock
// has more than one of, each beside its session's server process: shared
// holders and semaphore holders (see sharedSQL and AcquireSlot). A row
// whose session has ended is a leftover, never shown: a holder is shown
// only while pg_locks says its session holds the lock. hold_waits has the
// waits that have lasted DeadlockAfter, for the search for deadlocks
// between processes (see waits.go).
//
// The table is unlogged: an owner record is never written to the WAL, and a
// server crash, which ends every lock anyway, empties it. The sequence is
// logged, and each acquisition commits synchronously with a WAL record of
// its own (see acquireSQL and pinned), so a token never repeats, not even
// after a crash: no token is returned before the sequence's record that
// covers it is on disk.
const Schema = `CREATE SEQUENCE IF NOT EXISTS hold_locks_fence;
CREATE UNLOGGED TABLE IF NOT EXISTS hold_locks (
	key bigint PRIMARY KEY,
	name text NOT NULL,
	fence bigint NOT NULL,
	owner text NOT NULL DEFAULT '',
	backend_pid integer NOT NULL DEFAULT 0
);
CREATE UNLOGGED TABLE IF NOT EXISTS hold_holders (
	key bigint NOT NULL,
	backend_pid integer NOT NULL,
	owner text NOT NULL,
	PRIMARY KEY (key, backend_pid)
);
` + waitsSchema

// schemaLockKey serializes concurrent creations of the schema, which would
// otherwise collide in the catalogs ("duplicate key value").
var schemaLockKey = Key("\x00schema")

// The acquisition, in one statement and one round trip: take the advisory
// lock (the only row the SELECT reads is the lock function's result, so the
// lock is taken before anything else happens), and once it is held take a
// token from the sequence and record name, token, owner and session in
// hold_locks. The record is written only if the key's row is free or names
// this lock: a row naming another lock means a key collision, and the
// statement then returns no row. A plain INSERT, without a CTE around the
// lock, costs the server noticeably less per acquisition.
//
// The statement also writes a WAL record of its own (an empty logical
// message, "hold"), so that its commit, synchronous (see pinned), waits
// until the WAL is on disk up to the commit: the sequence's own record
// comes only every 32 values, and the transaction that writes it may not
// have committed yet when another takes a value it covers. Without the
// message that other transaction, having written only to an unlogged
// table, would commit without a flush, and a crash could take the sequence
// back below a token already handed out. Every WAL record before the
// commit is on disk once the commit is, so no token is returned before the
// sequence's record covering it is durable.
const acquireSQL = `INSERT INTO hold_locks AS t (key, name, fence, owner, backend_pid)
	SELECT $1, $2, nextval('hold_locks_fence'), $3, pg_backend_pid() FROM %s
	ON CONFLICT (key) DO UPDATE SET fence = excluded.fence, owner = excluded.owner, backend_pid = excluded.backend_pid
	WHERE t.name = excluded.name
	RETURNING t.fence, t.backend_pid`

// durable is the WAL record of an acquisition: a transactional logical
// message, which logical decoding passes over unless asked for messages.
const durable = `pg_logical_emit_message(true, 'hold', '')`

var (
	waitSQL = fmt.Sprintf(acquireSQL, `pg_advisory_lock($1::bigint) AS l, LATERAL (SELECT `+durable+`) AS d`)
	// trySQL returns no row when the lock is busy, too, and then writes
	// no WAL.
	trySQL = fmt.Sprintf(acquireSQL, `pg_try_advisory_lock($1::bigint) AS got, LATERAL (SELECT `+durable+` WHERE got) AS d WHERE got`)
)

// sharedSQL takes a shared hold, in one statement and one round trip: the
// advisory lock in shared mode (pg_advisory_lock_shared), and once it is
// held the holder's record in hold_holders, beside its session. A row of
// hold_locks naming another lock for the key is a collision, as for an
// exclusive hold: the statement then returns no row. A shared hold takes
// no token (readers hold together, so no order among them could fence a
// write), and its row of hold_locks is made, without one, only so that
// Locks lists the lock.
const sharedSQL = `WITH named AS (
		INSERT INTO hold_locks (key, name, fence) VALUES ($1, $2, 0) ON CONFLICT (key) DO NOTHING
	)
	INSERT INTO hold_holders AS t (key, backend_pid, owner)
	SELECT $1, pg_backend_pid(), $3 FROM %s
	NOT EXISTS (SELECT 1 FROM hold_locks WHERE key = $1 AND name <> $2)
	ON CONFLICT (key, backend_pid) DO UPDATE SET owner = excluded.owner
	RETURNING 0::bigint, t.backend_pid`

var (
	sharedWaitSQL = fmt.Sprintf(sharedSQL, `pg_advisory_lock_shared($1::bigint) AS l WHERE`)
	sharedTrySQL  = fmt.Sprintf(sharedSQL, `pg_try_advisory_lock_shared($1::bigint) AS got WHERE got AND`)
)

// Acquire waits in the server's queue for the advisory lock of the name
// req.Path until it is held or ctx ends. When ctx ends, the driver sends
// the server a cancel request, which ends the wait there; the session is
// then closed, so that a lock granted just before the cancel arrived is
// freed with it.
func (p *Protocol) Acquire(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(err)}
	}
	return p.acquire(ctx, req, true)
}

// TryAcquire takes the lock if nobody holds it, and never waits; otherwise
// it returns an error matching hold.ErrBusy that names the holder. Its
// round trips are bounded by the request timeout.
func (p *Protocol) TryAcquire(req *lock.Request) (lock.Handle, error) {
	ctx, cancel := p.rpc(context.Background())
	defer cancel()
	return p.acquire(ctx, req, false)
}

func (p *Protocol) acquire(ctx context.Context, req *lock.Request, wait bool) (lock.Handle, error) {
	if err := checkName("acquire", req.Path); err != nil {
		return nil, err
	}
	name, key := req.Path, Key(req.Path)
	owner := req.Owner
	if owner.ID == "" {
		owner.ID = lock.NewID()
	}
	owner.Protocol = p.Name()
	owner.Shared = req.Shared
	owner.Fence = 0
	// owner.Command comes with its secrets (URL passwords among them)
	// masked already: the record is readable by every client of the
	// database, as a lock file is by every user.
	owner.StartedAt = time.Now()

	budget := p.budget(req.StopWithin)
	if p.cfgErr == nil && budget < minBudget {
		return nil, &lock.Error{Op: "acquire", Path: name, Err: errTooShort,
			Hint: fmt.Sprintf("the server keeps a silent holder's session for %s, which leaves no time for a heartbeat once %s (to stop the command) and a safety margin of %s are kept back; set a longer idle_session_timeout (milliseconds) in the address",
				p.bounds.end, req.StopWithin, safetyMargin(p.bounds.end))}
	}
	query := trySQL
	switch {
	case req.Shared && wait:
		query = sharedWaitSQL
	case req.Shared:
		query = sharedTrySQL
	case wait:
		query = waitSQL
	}
	w := &outage{p: p, name: name}
	createdSchema := false
	for {
		c, reused, err := p.get(ctx)
		if err != nil {
			err = relabel(err, "acquire", name)
			if wait && transientError(err) {
				if err = w.pause(ctx, err); err == nil {
					continue
				}
			}
			return nil, w.settle(ctx, err)
		}
		w.reconnected(ctx)
		record := owner.Encode()
		var fence int64
		var backend int32
		c.wh.cancelOnServer = wait
		qctx := ctx
		if wait {
			qctx = p.watching(ctx, req, c, name, key, record[:len(record)-1])
		}
		sent := time.Now()
		err = c.c.QueryRow(qctx, query, c.mode(query), key, name, string(record[:len(record)-1])).Scan(&fence, &backend)
		c.wh.cancelOnServer = false
		if errors.Is(err, pgx.ErrNoRows) {
			// Busy (a try), or a collision: the session holds the
			// lock only in the second case.
			held, herr := c.holds(ctx, key)
			switch {
			case herr != nil:
				c.close()
				return nil, p.queryError("acquire", name, herr)
			case held:
				c.close()
				return nil, p.collision(name, key)
			}
			p.put(c)
			return nil, p.busy(name, &lock.Error{Op: "acquire", Path: name, Err: lock.ErrBusy})
		}
		if err != nil {
			// An advisory lock outlives a failed statement, so a
			// session whose statement failed is closed: that frees
			// whatever it may hold.
			c.close()
			if qctx.Err() != nil {
				return nil, w.settle(qctx, err)
			}
			var pgErr *pgconn.PgError
			switch {
			case errors.As(err, &pgErr) && pgErr.Code == "42P01" && !createdSchema:
				// hold_locks does not exist yet: create it, once.
				if err := p.createSchema(ctx); err != nil {
					return nil, err
				}
				createdSchema = true
				continue
			case reused && sessionGone(err):
				// The idle session was ended by the server (a
				// restart, an idle timeout): try another one.
				continue
			case wait && sessionGone(err):
				// The server restarted or the connection broke
				// while we waited: wait again, on a new session.
				if err = w.pause(ctx, p.queryError("acquire", name, err)); err == nil {
					continue
				}
				return nil, w.settle(ctx, err)
			}
			return nil, p.queryError("acquire", name, err)
		}
		owner.Fence = uint64(fence)
		if l := req.Logger; l != nil {
			l.Debug("hold: acquired", "path", name, "key", key, "fence", owner.Fence, "backend", backend)
		}
		// The server cannot end the session as idle before it answered
		// the acquisition, which was after it was sent. After a long
		// wait that bound says nothing, since the grant came late; the
		// deadline then counts from the answer's arrival (its time in
		// flight is within the safety margin) and a heartbeat follows
		// at once to confirm the session from a known moment.
		anchor, pingNow := sent, false
		if waited := time.Since(sent); waited > budget/4 {
			anchor, pingNow = time.Now(), true
		}
		h := newHandle(p, c, name, key, owner, backend, req.StopWithin, anchor, pingNow)
		return h, nil
	}
}

// busy completes e, a busy or timed-out acquisition, with the holder: the
// owner record, and the server process of its session from pg_locks.
func (p *Protocol) busy(name string, e *lock.Error) *lock.Error {
	st, pid, err := p.inspect("acquire", name)
	if err != nil || st.Holder == nil || st.State == lock.Free {
		// A lock free by now (its holders let go as the wait ended) has
		// only its last exclusive holder's record, which may be of a
		// process gone long ago: that one is no holder to name.
		return e
	}
	e.Holder = st.Holder
	if pid != 0 && st.State != lock.Free {
		hint := fmt.Sprintf("its database session is server process %d (pg_stat_activity shows it; pg_terminate_backend(%d) ends it)", pid, pid)
		if e.Hint != "" {
			hint = e.Hint + "; " + hint
		}
		e.Hint = hint
	}
	return e
}

// outage is what a waiter knows while it rides out a server that does
// not answer or restarts.
type outage struct {
	p        *Protocol
	name     string
	failures int
	noticed  bool
	down     bool
	holder   *lock.Holder // the last holder seen
	hint     string
}

// pause waits before the next attempt, with a growing pause, and says
// once that the server is unreachable and hold keeps trying.
func (w *outage) pause(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return err
	}
	w.down = true
	if !w.noticed && w.p.notice != nil {
		w.noticed = true
		w.p.notice(fmt.Sprintf("hold: %s: the PostgreSQL server is unreachable or restarting (%v); hold keeps trying until the wait ends", w.name, unwrapHold(err)))
	}
	w.failures++
	t := time.NewTimer(min(time.Duration(1<<min(w.failures, 6))*25*time.Millisecond, time.Second))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return err
	}
}

// reconnected notes a connection after an outage, and who holds the lock
// then, for the message of a wait that ends later.
func (w *outage) reconnected(ctx context.Context) {
	if !w.down {
		return
	}
	w.down, w.failures = false, 0
	if e := w.p.busy(w.name, &lock.Error{}); e.Holder != nil {
		w.holder, w.hint = e.Holder, e.Hint
	}
}

// settle is the error of a wait that ended: ctx's end names the holder
// (asking the server, or the last one seen).
func (w *outage) settle(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return err
	}
	e := &lock.Error{Op: "acquire", Path: w.name, Err: lock.WaitError(ctx.Err())}
	if !w.down {
		w.p.busy(w.name, e) // one round trip, on a session kept idle
	}
	if e.Holder == nil && w.holder != nil {
		e.Holder, e.Hint = w.holder, w.hint
	}
	if w.down {
		msg := fmt.Sprintf("%s: %v", ErrUnreachable, unwrapHold(err))
		if e.Hint != "" {
			msg += "; " + e.Hint
		}
		e.Hint = msg
	}
	return e
}

// transientError reports whether err is an outage a waiter rides out: no
// answer, a broken connection, a server starting up or shutting down.
func transientError(err error) bool {
	if errors.Is(err, ErrUnreachable) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "53300":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	return false
}

// unwrapHold returns what an *lock.Error wraps, for a message that names
// the lock itself.
func unwrapHold(err error) error {
	var e *lock.Error
	if errors.As(err, &e) && e.Err != nil {
		return e.Err
	}
	return err
}

// sessionGone reports whether err says the session ended: the server's
// fatal error, or a broken connection.
func sessionGone(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Severity == "FATAL" || pgErr.Severity == "PANIC"
	}
	return true
}

// createSchema creates the sequence and the table, serialized with other
// clients doing the same.
func (p *Protocol) createSchema(ctx context.Context) error {
	c, _, err := p.get(ctx)
	if err != nil {
		return err
	}
	rctx, cancel := p.rpc(ctx)
	defer cancel()
	// One simple-protocol call: the statements run in one transaction,
	// which the transaction-level advisory lock serializes.
	sql := fmt.Sprintf("SELECT pg_advisory_xact_lock(%d);\n%s", schemaLockKey, Schema)
	if err := c.c.PgConn().Exec(rctx, sql).Close(); err != nil {
		c.close()
		e := p.queryError("acquire", "hold_locks", err).(*lock.Error)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			e.Hint = "the table hold_locks is missing and this user may not create it; have it created once (see the postgres package's Schema, or docs/postgres.md)"
		}
		return e
	}
	p.put(c)
	return nil
}

// collision reports that name's key is recorded for another lock name.
func (p *Protocol) collision(name string, key int64) error {
	ctx, cancel := p.rpc(context.Background())
	defer cancel()
	other := "another lock"
	if c, _, err := p.get(ctx); err == nil {
		var n string
		if c.c.QueryRow(ctx, `SELECT name FROM hold_locks WHERE key = $1`, key).Scan(&n) == nil {
			other = fmt.Sprintf("the lock %q", n)
		}
		p.put(c)
	}
	return &lock.Error{Op: "acquire", Path: name, Err: lock.ErrInvalidName,
		Hint: fmt.Sprintf("its advisory-lock key %d is recorded in hold_locks for %s (a hash collision); choose another name", key, other)}
}

// queryError turns a failed round trip into hold's error: a server that
// did not answer or whose connection broke is ErrUnreachable; an error the
// server sent (permission denied, ...) is kept as is.
func (p *Protocol) queryError(op, name string, err error) error {
	if !sessionGone(err) {
		return &lock.Error{Op: op, Path: name, Err: err}
	}
	return &lock.Error{Op: op, Path: name, Err: fmt.Errorf("%w (%s): %v", ErrUnreachable, p.where(), err)}
}

// relabel sets the Op and Path of a connection error to those of the
// operation that needed the connection.
func relabel(err error, op, name string) error {
	var e *lock.Error
	if errors.As(err, &e) {
		c := *e
		c.Op, c.Path = op, name
		return &c
	}
	return &lock.Error{Op: op, Path: name, Err: err}
}
