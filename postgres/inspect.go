package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hold-dev/hold/lock"
)

// heldBy is the SQL condition that the pg_locks row l is the granted
// advisory lock of the key whose halves are hi and lo, in this database.
const heldBy = `l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
	AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND l.classid::bigint = %s AND l.objid::bigint = %s`

// exclusive and shared narrow heldBy to one mode of the lock.
const (
	exclusive = ` AND l.mode = 'ExclusiveLock'`
	shared    = ` AND l.mode = 'ShareLock'`
)

var (
	inspectSQL = `SELECT t.fence, t.owner, t.backend_pid, l.pid
	FROM (SELECT 1) AS one
	LEFT JOIN hold_locks t ON t.key = $1 AND t.name = $4
	LEFT JOIN pg_locks l ON ` + fmt.Sprintf(heldBy, "$2", "$3") + exclusive
	// inspectBareSQL is inspectSQL for a database without hold_locks.
	inspectBareSQL = `SELECT NULL::bigint, NULL::text, NULL::integer, l.pid
	FROM (SELECT 1) AS one
	LEFT JOIN pg_locks l ON ` + fmt.Sprintf(heldBy, "$2", "$3") + exclusive + `
	WHERE $1::bigint IS NOT NULL AND $4::text IS NOT NULL`
	// sharersSQL lists the sessions holding the key shared, with each
	// one's record; sharersBareSQL is it for a database without
	// hold_holders.
	sharersSQL = `SELECT l.pid, h.owner FROM pg_locks l
	LEFT JOIN hold_holders h ON h.key = $1 AND h.backend_pid = l.pid
	WHERE ` + fmt.Sprintf(heldBy, "$2", "$3") + shared
	sharersBareSQL = `SELECT l.pid, NULL::text FROM pg_locks l
	WHERE $1::bigint IS NOT NULL AND ` + fmt.Sprintf(heldBy, "$2", "$3") + shared
	locksSQL = `SELECT t.name, t.fence, t.owner, t.backend_pid, l.pid,
		(SELECT count(*) FROM pg_locks w WHERE ` + strings.ReplaceAll(strings.Replace(fmt.Sprintf(heldBy, "(t.key >> 32) & 4294967295", "t.key & 4294967295"), "l.granted", "NOT l.granted", 1), "l.", "w.") + `),
		(SELECT count(*) FROM pg_locks l WHERE ` + fmt.Sprintf(heldBy, "(t.key >> 32) & 4294967295", "t.key & 4294967295") + shared + `)
	FROM hold_locks t
	LEFT JOIN pg_locks l ON ` + fmt.Sprintf(heldBy, "(t.key >> 32) & 4294967295", "t.key & 4294967295") + exclusive + `
	ORDER BY t.name`
)

// record is what the server knows of one lock: its row in hold_locks (if
// any) and the session holding its advisory lock (if any).
type record struct {
	fence      *int64
	owner      *string
	backendPID *int32
	holderPID  *int32 // the backend holding the advisory lock
	// sharers are the holders of a lock held shared, each with its
	// record where there is one; readers counts them where they are
	// not read (Locks).
	sharers []sharer
	readers int64
}

// status describes the lock name from its record. A held lock's owner
// record is shown only if it was written by the session that holds the
// lock now; a lock held by a session that is not hold's (a hand-written
// pg_advisory_lock on the same key) has no owner record.
func (p *Protocol) status(name string, r record) *lock.Status {
	st := &lock.Status{Path: name, Protocol: p.Name(), State: lock.Free}
	var o *lock.Owner
	if r.owner != nil {
		if dec, ok := lock.DecodeOwner([]byte(*r.owner)); ok {
			o = dec
		}
	}
	if r.fence != nil {
		st.Fence = uint64(*r.fence)
		if o != nil {
			o.Fence = st.Fence
		}
	}
	if r.holderPID == nil && (len(r.sharers) > 0 || r.readers > 0) {
		st.State = lock.HeldShared
		// A semaphore's holders hold the name's key shared too: their
		// records say which place of how many each holds (see
		// semaphore.go).
		for _, sh := range r.sharers {
			if sh.slots > 0 && st.Slots == 0 {
				st.Slots = sh.slots
				st.SlotHolders = make([]*lock.Holder, sh.slots)
			}
		}
		for _, sh := range r.sharers {
			switch {
			case st.Slots > 0 && sh.slots == st.Slots && sh.place >= 0 && sh.place < st.Slots:
				st.SlotHolders[sh.place] = sh.Holder
			case sh.slots == 0:
				st.Holders = append(st.Holders, sh.Holder)
			}
		}
		switch {
		case len(st.Holders) > 0:
			st.Holder = st.Holders[0]
		case st.Slots > 0:
			for _, h := range st.SlotHolders {
				if h != nil && st.Holder == nil {
					st.Holder = h
				}
			}
		}
		if st.Holder == nil {
			st.Holder = &lock.Holder{Alive: lock.Alive}
		}
		return st
	}
	if r.holderPID == nil {
		if o != nil {
			o.Released = true // the last holder's record
			st.Holder = &lock.Holder{Owner: o, Alive: lock.LivenessUnknown}
		}
		return st
	}
	st.State = lock.HeldExclusive
	// The server frees a lock when its session ends, so a held lock's
	// session is alive; whether the process behind it still runs, the
	// server cannot say until the connection breaks.
	st.Holder = &lock.Holder{Alive: lock.Alive}
	if o != nil && r.backendPID != nil && *r.backendPID == *r.holderPID {
		st.Holder.Owner = o
	}
	return st
}

// Inspect reports whether the lock name is held and by whom, without
// queueing: the session holding its advisory lock (pg_locks) and the owner
// record in hold_locks. Status.Fence is the last token handed out for the
// name (0 when hold_locks has no row for it).
func (p *Protocol) Inspect(name string) (*lock.Status, error) {
	st, _, err := p.inspect("inspect", name)
	return st, err
}

func (p *Protocol) inspect(op, name string) (*lock.Status, int32, error) {
	if err := checkName(op, name); err != nil {
		return nil, 0, err
	}
	ctx, cancel := p.rpc(context.Background())
	defer cancel()
	c, _, err := p.get(ctx)
	if err != nil {
		return nil, 0, relabel(err, op, name)
	}
	st, pid, err := p.inspectOn(ctx, c, name)
	if err != nil {
		c.close()
		return nil, 0, p.queryError(op, name, err)
	}
	p.put(c)
	return st, pid, nil
}

// statusOn is Inspect on the session c.
func (p *Protocol) statusOn(ctx context.Context, c *conn, name string) (*lock.Status, error) {
	st, _, err := p.inspectOn(ctx, c, name)
	return st, err
}

// inspectOn reads the state of the lock name on the session c, and the
// server process of its (first) holder's session.
func (p *Protocol) inspectOn(ctx context.Context, c *conn, name string) (*lock.Status, int32, error) {
	key := Key(name)
	hi, lo := keyHalves(key)
	var r record
	err := c.c.QueryRow(ctx, inspectSQL, c.mode(inspectSQL), key, hi, lo, name).Scan(&r.fence, &r.owner, &r.backendPID, &r.holderPID)
	if isNoSchema(err) {
		err = c.c.QueryRow(ctx, inspectBareSQL, c.mode(inspectBareSQL), key, hi, lo, name).Scan(&r.fence, &r.owner, &r.backendPID, &r.holderPID)
	}
	if err != nil {
		return nil, 0, err
	}
	var pid int32
	if r.holderPID != nil {
		pid = *r.holderPID
	} else {
		if r.sharers, err = c.sharers(ctx, key); err != nil {
			return nil, 0, err
		}
		if len(r.sharers) > 0 {
			pid = r.sharers[0].pid
		}
	}
	return p.status(name, r), pid, nil
}

// isNoSchema reports whether err says one of hold's tables is missing.
func isNoSchema(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}

// sharer is a session that holds a lock's key shared: a reader, or a
// semaphore's holder (slots above 0, its place in place).
type sharer struct {
	*lock.Holder
	pid   int32
	place int
	slots int
}

// sharers reads who holds key shared, oldest first, with their sessions'
// server processes.
func (c *conn) sharers(ctx context.Context, key int64) ([]sharer, error) {
	hi, lo := keyHalves(key)
	var found []sharer
	read := func(sql string) error {
		found = found[:0]
		rows, _ := c.c.Query(ctx, sql, c.mode(sql), key, hi, lo)
		var pid int32
		var owner *string
		_, err := pgx.ForEachRow(rows, []any{&pid, &owner}, func() error {
			sh := sharer{Holder: &lock.Holder{Alive: lock.Alive}, pid: pid, place: -1}
			if owner != nil {
				if o, ok := lock.DecodeOwner([]byte(*owner)); ok {
					sh.Owner = o
				}
				if place, slots, ok := placeOf([]byte(*owner)); ok {
					sh.place, sh.slots = place, slots
				}
			}
			found = append(found, sh)
			return nil
		})
		return err
	}
	err := read(sharersSQL)
	if isNoSchema(err) {
		err = read(sharersBareSQL)
	}
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(found, func(a, b sharer) int {
		// A holder whose record is not written yet (its statement is
		// still running) comes after those whose are: the holder named
		// is one known to hold.
		if (a.Owner == nil) != (b.Owner == nil) {
			if a.Owner == nil {
				return 1
			}
			return -1
		}
		var ta, tb time.Time
		if a.Owner != nil {
			ta = a.Owner.StartedAt
		}
		if b.Owner != nil {
			tb = b.Owner.StartedAt
		}
		return ta.Compare(tb)
	})
	return found, nil
}

// Locks lists the locks recorded in hold_locks, sorted by name, each with
// its state: held (and by whom) or free (with its last holder's record).
// A database without hold_locks has none. Locks taken on the same keys by
// other means than this package are not listed.
func (p *Protocol) Locks(ctx context.Context) ([]*lock.Status, error) {
	var out []*lock.Status
	err := p.List(ctx, "", func(st *lock.Status, _ int) { out = append(out, st) })
	return out, err
}

// List reports the locks recorded in hold_locks whose names start with
// prefix ("" for all), sorted by name: each is called with the lock's state
// and the number of sessions waiting for it (`hold ls`).
func (p *Protocol) List(ctx context.Context, prefix string, each func(st *lock.Status, waiters int)) error {
	ctx, cancel := p.rpc(ctx)
	defer cancel()
	c, _, err := p.get(ctx)
	if err != nil {
		return relabel(err, "list", p.where())
	}
	rows, _ := c.c.Query(ctx, locksSQL)
	type listed struct {
		name    string
		r       record
		waiters int64
	}
	var all []listed
	var l listed
	_, err = pgx.ForEachRow(rows, []any{&l.name, &l.r.fence, &l.r.owner, &l.r.backendPID, &l.r.holderPID, &l.waiters, &l.r.readers}, func() error {
		if strings.HasPrefix(l.name, prefix) {
			all = append(all, l)
		}
		return nil
	})
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "42P01":
		p.put(c)
		return nil
	case err != nil:
		c.close()
		return p.queryError("list", p.where(), err)
	}
	for _, l := range all {
		waiters := int(l.waiters)
		if l.r.holderPID == nil && l.r.readers > 0 {
			// Held shared: by readers, or by a semaphore's holders,
			// which the records tell apart; a semaphore's waiters
			// queue for its gate (see semaphore.go).
			if l.r.sharers, err = c.sharers(ctx, Key(l.name)); err != nil {
				c.close()
				return p.queryError("list", p.where(), err)
			}
			if n := slotsOf(l.r.sharers); n > 0 {
				if waiters, err = c.slotWaiters(ctx, l.name, n); err != nil {
					c.close()
					return p.queryError("list", p.where(), err)
				}
			}
		}
		each(p.status(l.name, l.r), waiters)
	}
	p.put(c)
	return nil
}

// slotsOf is the N of the semaphore whose holders are sharers, 0 for
// readers.
func slotsOf(sharers []sharer) int {
	for _, sh := range sharers {
		if sh.slots > 0 {
			return sh.slots
		}
	}
	return 0
}

// slotWaitersSQL counts the sessions waiting for the gate $1 and whether
// one waits for any of the slots $2 (the first waiter, on a session per
// slot).
var slotWaitersSQL = `SELECT (SELECT count(*) FROM pg_locks l WHERE ` +
	strings.Replace(fmt.Sprintf(heldBy, "($1::bigint >> 32) & 4294967295", "$1::bigint & 4294967295"), "l.granted", "NOT l.granted", 1) + `)
	+ (SELECT count(*) FROM (SELECT 1 FROM unnest($2::bigint[]) AS k(key) WHERE EXISTS (SELECT 1 FROM pg_locks l WHERE ` +
	strings.Replace(fmt.Sprintf(heldBy, "(k.key >> 32) & 4294967295", "k.key & 4294967295"), "l.granted", "NOT l.granted", 1) + `) LIMIT 1) AS w)`

// slotWaiters counts the requests waiting for a place in the semaphore of
// n slots on name.
func (c *conn) slotWaiters(ctx context.Context, name string, n int) (int, error) {
	keys := make([]int64, n)
	for i := range keys {
		keys[i] = slotKey(name, i)
	}
	var w int64
	err := c.c.QueryRow(ctx, slotWaitersSQL, gateKey(name), keys).Scan(&w)
	return int(w), err
}

// terminateSQL ends the session of backend $3 if it holds the advisory
// lock of the key whose halves are $1 and $2, in one statement: no row
// means it does not (any more).
var terminateSQL = `SELECT pg_terminate_backend(l.pid) FROM pg_locks l WHERE l.pid = $3 AND ` + fmt.Sprintf(heldBy, "$1", "$2")

// beforeTerminate runs between Break's reading of the holder and its
// ending of the holder's session; a test makes the lock change hands there.
var beforeTerminate = func() {}

// Break ends the session holding the lock name, which frees the lock, if
// force is set. Without force it refuses a held lock with an error
// matching hold.ErrBusy: the server frees the lock of a session that ended
// by itself, so a held lock always has a live session, and ending it is
// for when that session's owner is known to be stuck. Ending another
// user's session needs the pg_signal_backend role (or superuser). The
// holder, if its process still runs, sees its Lost channel close.
//
// The session ended is the holder Break read and returns, and only while
// it still holds the lock: the check and the end are one statement, so a
// session that let go of the lock meanwhile (and may hold another one by
// now, or be idle for its next) is left alone. If the lock passed to
// another session meanwhile, Break returns that holder with an error
// matching hold.ErrBusy, and ends nothing.
func (p *Protocol) Break(name string, force bool) (*lock.Status, error) {
	st, pid, err := p.inspect("break", name)
	if err != nil || st.State == lock.Free {
		return st, err
	}
	if !force {
		return st, &lock.Error{Op: "break", Path: name, Err: lock.ErrBusy, Holder: st.Holder,
			Hint: fmt.Sprintf("its database session (backend pid %d) is alive, and the server frees the lock when it ends; force the break to end that session", pid)}
	}
	ctx, cancel := p.rpc(context.Background())
	defer cancel()
	c, _, err := p.get(ctx)
	if err != nil {
		return st, relabel(err, "break", name)
	}
	beforeTerminate()
	hi, lo := keyHalves(Key(name))
	var ended bool
	err = c.c.QueryRow(ctx, terminateSQL, hi, lo, pid).Scan(&ended)
	if errors.Is(err, pgx.ErrNoRows) {
		// The holder let go meanwhile: say who holds the lock now.
		p.put(c)
		now, npid, err := p.inspect("break", name)
		if err != nil || now.State == lock.Free {
			return now, err
		}
		return now, &lock.Error{Op: "break", Path: name, Err: lock.ErrBusy, Holder: now.Holder,
			Hint: fmt.Sprintf("the lock passed from backend pid %d to backend pid %d while it was being broken, and that session was not ended; break it again to end it", pid, npid)}
	}
	if err != nil {
		c.close()
		e := p.queryError("break", name, err).(*lock.Error)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42501" {
			e.Hint = "ending another user's session needs the pg_signal_backend role or superuser"
		}
		return st, e
	}
	// The lock is free once the session has ended, which takes the
	// server a moment after the signal.
	for {
		var held bool
		err := c.c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = $3 AND `+fmt.Sprintf(heldBy, "$1", "$2")+`)`,
			hi, lo, pid).Scan(&held)
		if err != nil {
			c.close()
			return st, p.queryError("break", name, err)
		}
		if !held {
			break
		}
		select {
		case <-ctx.Done():
			p.put(c)
			return st, &lock.Error{Op: "break", Path: name, Err: lock.ErrBusy, Holder: st.Holder,
				Hint: fmt.Sprintf("backend pid %d was told to end but still holds the lock", pid)}
		case <-time.After(10 * time.Millisecond):
		}
	}
	p.put(c)
	return st, nil
}
