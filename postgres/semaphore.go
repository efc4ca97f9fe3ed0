package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hold-dev/hold/lock"
)

var _ lock.Semaphore = (*Protocol)(nil)

// A semaphore of N slots on the name T is kept in advisory locks:
//
//   - slot i (0..N-1) is the exclusive advisory lock of the key
//     Key(T + "\x00slot " + i): a holder's session holds it, so the
//     server frees the place the moment the session ends, crash or not;
//   - every holder's session also holds T's own key shared, as a reader
//     does, so that a plain (exclusive) lock of T waits for every place
//     to be free and a place waits for a plain holder: the two never hold
//     at once. Its record, with its place and N, is its row of
//     hold_holders, and its token comes from hold_locks_fence, as an
//     exclusive holder's does, so tokens rise across all places;
//   - the gate, the exclusive advisory lock of Key(T + "\x00gate"), is
//     held by one entrant at a time: every request queues for it in the
//     server's lock queue, which serves waiters in the order they asked
//     and without polling. That is the semaphore's arrival order.
//
// The gate's holder checks the N in use (the holders' rows, of sessions
// that pg_locks says hold T shared: a request with another N fails with
// ErrSlotCount naming it), reads which slots pg_locks shows held, and
// takes the first free one with pg_try_advisory_lock. Every entrant
// passes the gate, so none can take a slot between that read and the
// try; a slot is freed by its holder, or by the server when the holder's
// session ends.
//
// If no slot is free, the gate's holder must wait for whichever slot is
// freed first, and the server can wait for one lock per session only.
// A NOTIFY on release would not do: a session that ends (a crash, a kill,
// a broken connection) frees its advisory locks without any notification,
// and a waiter listening for one would sleep on a free slot. So the
// gate's holder waits on N sessions at once, one blocked in
// pg_advisory_lock on each slot: the server grants the first slot freed,
// however it is freed, to the session waiting for it, at once. That
// session becomes the holder's; the other waits are cancelled on the
// server, and any of them granted meanwhile is closed, which frees its
// slot again. Only the first waiter pays for these sessions; the ones
// behind it wait for the gate, on one session each.
//
// Readers (shared holds) of the name hold beside a semaphore's places, as
// on kernel locks: both hold the name's key shared.

// slotKey is the advisory key of a semaphore's slot i.
func slotKey(name string, i int) int64 { return Key(name + "\x00slot " + strconv.Itoa(i)) }

// gateKey is the advisory key a semaphore's entrants queue for.
func gateKey(name string) int64 { return Key(name + "\x00gate") }

// maxSlots bounds N: the first waiter keeps a session per slot.
const maxSlots = 64

// takeSlotSQL makes the session that holds slot $4 a holder: T's key
// ($1) shared, a token, and its record ($3) beside its session. As
// acquireSQL does, it writes a WAL record of its own so that the token is
// durable before it is returned, and returns no row for a key recorded
// for another name (a collision).
//
// takeSlotTrySQL is it for a TryAcquireSlot: no row either when a plain
// holder has the name's key, and the holder's row is then not written.
const takeSlotSQL = `WITH holder AS (
		INSERT INTO hold_holders AS h (key, backend_pid, owner) VALUES ($1, pg_backend_pid(), $3)
		ON CONFLICT (key, backend_pid) DO UPDATE SET owner = excluded.owner
	)
	INSERT INTO hold_locks AS t (key, name, fence)
	SELECT $1, $2, nextval('hold_locks_fence') FROM pg_advisory_lock_shared($1::bigint) AS l, LATERAL (SELECT ` + durable + `) AS d
	WHERE $4::bigint IS NOT NULL
	ON CONFLICT (key) DO UPDATE SET fence = excluded.fence WHERE t.name = excluded.name
	RETURNING t.fence, pg_backend_pid()`

const takeSlotTrySQL = `WITH got AS MATERIALIZED (SELECT pg_try_advisory_lock_shared($1::bigint) AS got),
	holder AS (
		INSERT INTO hold_holders AS h (key, backend_pid, owner) SELECT $1, pg_backend_pid(), $3 FROM got WHERE got
		ON CONFLICT (key, backend_pid) DO UPDATE SET owner = excluded.owner
	)
	INSERT INTO hold_locks AS t (key, name, fence)
	SELECT $1, $2, nextval('hold_locks_fence') FROM got, LATERAL (SELECT ` + durable + ` WHERE got) AS d
	WHERE got AND $4::bigint IS NOT NULL
	ON CONFLICT (key) DO UPDATE SET fence = excluded.fence WHERE t.name = excluded.name
	RETURNING t.fence, pg_backend_pid()`

// unlockSlotSQL frees a holder's slot ($2), its shared hold of T's key
// ($1) and its record.
const unlockSlotSQL = `WITH gone AS (DELETE FROM hold_holders WHERE key = $1 AND backend_pid = pg_backend_pid())
	SELECT pg_advisory_unlock_shared($1::bigint) AND pg_advisory_unlock($2::bigint)`

// heldSlotsSQL returns which of the keys $1 pg_locks shows held, by their
// index (0-based) in $1.
var heldSlotsSQL = `SELECT k.i::int - 1 FROM unnest($1::bigint[]) WITH ORDINALITY AS k(key, i)
	WHERE EXISTS (SELECT 1 FROM pg_locks l WHERE ` + fmt.Sprintf(heldBy, "(k.key >> 32) & 4294967295", "k.key & 4294967295") + `)`

// AcquireSlot waits for a place in the semaphore of req.Slots slots on the
// name req.Path, or until ctx ends (see the layout above).
func (p *Protocol) AcquireSlot(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(err)}
	}
	if req.Slots <= 1 {
		return p.Acquire(ctx, req)
	}
	return p.acquireSlot(ctx, req, true)
}

// TryAcquireSlot takes a place if one is free and nobody waits for one,
// and never waits otherwise: an error matching hold.ErrBusy names every
// holder.
func (p *Protocol) TryAcquireSlot(req *lock.Request) (lock.Handle, error) {
	if req.Slots <= 1 {
		return p.TryAcquire(req)
	}
	ctx, cancel := p.rpc(context.Background())
	defer cancel()
	return p.acquireSlot(ctx, req, false)
}

// InspectSlots reports the semaphore on the name path: the N of its
// holders and the holder of each place (Inspect tells a semaphore by its
// holders' records).
func (p *Protocol) InspectSlots(path string) (*lock.Status, error) {
	return p.Inspect(path)
}

// slotRecord is what a semaphore holder's row adds to its owner record.
type slotRecord struct {
	Slot  *int `json:"slot"`
	Slots int  `json:"slots"`
}

// recordWithPlace adds the place and N to an encoded owner record.
func recordWithPlace(record []byte, place, slots int) string {
	b := append([]byte(nil), record[:len(record)-2]...) // "}\n"
	b = fmt.Appendf(b, `,"slot":%d,"slots":%d}`, place, slots)
	return string(b)
}

func (p *Protocol) acquireSlot(ctx context.Context, req *lock.Request, wait bool) (lock.Handle, error) {
	name, n := req.Path, req.Slots
	if err := checkName("acquire", name); err != nil {
		return nil, err
	}
	if req.Shared {
		return nil, &lock.Error{Op: "acquire", Path: name, Err: lock.ErrInvalidOption,
			Hint: "a semaphore's slots are exclusive places: ask for slots or for a shared lock, not both"}
	}
	if n > maxSlots {
		return nil, &lock.Error{Op: "acquire", Path: name, Err: lock.ErrInvalidOption,
			Hint: fmt.Sprintf("a PostgreSQL semaphore has at most %d slots (its first waiter keeps a session per slot)", maxSlots)}
	}
	owner := req.Owner
	if owner.ID == "" {
		owner.ID = lock.NewID()
	}
	owner.Protocol = p.Name()
	owner.Shared = false
	owner.Fence = 0
	budget := p.budget(req.StopWithin)
	if p.cfgErr == nil && budget < minBudget {
		return nil, &lock.Error{Op: "acquire", Path: name, Err: errTooShort,
			Hint: fmt.Sprintf("the server keeps a silent holder's session for %s, which leaves no time for a heartbeat once %s (to stop the command) and a safety margin of %s are kept back; set a longer idle_session_timeout (milliseconds) in the address",
				p.bounds.end, req.StopWithin, safetyMargin(p.bounds.end))}
	}
	s := &slotEntry{p: p, name: name, n: n, key: Key(name), owner: owner, stopWithin: req.StopWithin, logger: req.Logger}
	w := &outage{p: p, name: name}
	createdSchema, retried := false, false
	for {
		h, err := s.enter(ctx, wait)
		if err == nil {
			return h, nil
		}
		if ctx.Err() != nil {
			return nil, w.settle(ctx, err)
		}
		switch {
		case errors.Is(err, errNoSchema) && !createdSchema:
			if err := p.createSchema(ctx); err != nil {
				return nil, err
			}
			createdSchema = true
			continue
		case !wait && !retried && transientError(err):
			// An idle session the server had ended: try once more,
			// on a new one.
			retried = true
			continue
		case wait && transientError(err):
			if err = w.pause(ctx, err); err == nil {
				continue
			}
			return nil, w.settle(ctx, err)
		}
		return nil, err
	}
}

// errNoSchema says hold_locks or hold_holders is missing.
var errNoSchema = errors.New("hold's tables are missing")

// slotEntry is one request for a place.
type slotEntry struct {
	p          *Protocol
	name       string
	n          int
	key        int64
	owner      lock.Owner
	stopWithin time.Duration
	logger     *slog.Logger
}

// enter passes the gate, takes a place, and lets the gate go.
func (s *slotEntry) enter(ctx context.Context, wait bool) (*slotHandle, error) {
	p := s.p
	gate, _, err := p.get(ctx)
	if err != nil {
		return nil, relabel(err, "acquire", s.name)
	}
	ok := false
	defer func() {
		if !ok {
			gate.close() // frees the gate and whatever it took
		}
	}()
	if wait {
		gate.wh.cancelOnServer = true
		_, err = gate.c.Exec(ctx, `SELECT pg_advisory_lock($1::bigint)`, gateKey(s.name))
		gate.wh.cancelOnServer = false
	} else {
		var got bool
		if err = gate.c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1::bigint)`, gateKey(s.name)).Scan(&got); err == nil && !got {
			// An entrant is passing, or the first waiter waits for a
			// slot: busy only if every slot is held.
			if busy, err := s.allHeld(ctx, gate); err != nil || busy != nil {
				return nil, firstErr(err, busy)
			}
			_, err = gate.c.Exec(ctx, `SELECT pg_advisory_lock($1::bigint)`, gateKey(s.name))
		}
	}
	if err != nil {
		return nil, s.queryError(err)
	}
	// Under the gate: the N in use, and the first free slot.
	if err := s.checkCount(ctx, gate); err != nil {
		return nil, err
	}
	keys := make([]int64, s.n)
	for i := range keys {
		keys[i] = slotKey(s.name, i)
	}
	held := make([]bool, s.n)
	rows, _ := gate.c.Query(ctx, heldSlotsSQL, keys)
	var i int
	if _, err := pgx.ForEachRow(rows, []any{&i}, func() error {
		if i >= 0 && i < s.n {
			held[i] = true
		}
		return nil
	}); err != nil {
		return nil, s.queryError(err)
	}
	holder := gate
	place := -1
	for i := range keys {
		if held[i] {
			continue
		}
		var got bool
		if err := gate.c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1::bigint)`, keys[i]).Scan(&got); err != nil {
			return nil, s.queryError(err)
		}
		if got {
			place = i
			break
		}
	}
	if place < 0 {
		if !wait {
			busy, err := s.allHeld(ctx, gate)
			return nil, firstErr(err, busy)
		}
		// Every slot is held: wait for the first one freed.
		c, i, err := s.waitAny(ctx, keys)
		if err != nil {
			return nil, err
		}
		holder, place = c, i
	}
	h, err := s.take(ctx, holder, place, keys[place], wait)
	if err != nil {
		if holder != gate {
			holder.close()
		}
		return nil, err
	}
	// The place is held: the gate goes to the next entrant.
	if holder != gate {
		if _, err := gate.c.Exec(ctx, `SELECT pg_advisory_unlock($1::bigint)`, gateKey(s.name)); err == nil {
			ok = true
			p.put(gate)
		}
	} else {
		ok = true
		gctx, cancel := p.rpc(context.Background())
		if _, err := gate.c.Exec(gctx, `SELECT pg_advisory_unlock($1::bigint)`, gateKey(s.name)); err != nil {
			// The holder's own session keeps the gate: the place is
			// not worth the queue behind it.
			cancel()
			h.Release()
			ok = false
			return nil, s.queryError(err)
		}
		cancel()
	}
	return h, nil
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// waitAny waits, on one session per slot, for the first slot the server
// grants, and returns that session, which holds it.
func (s *slotEntry) waitAny(ctx context.Context, keys []int64) (*conn, int, error) {
	type result struct {
		c   *conn
		i   int
		err error
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan result, len(keys))
	for i, k := range keys {
		go func() {
			c, _, err := s.p.get(wctx)
			if err != nil {
				results <- result{nil, i, err}
				return
			}
			c.wh.cancelOnServer = true
			_, err = c.c.Exec(wctx, `SELECT pg_advisory_lock($1::bigint)`, k)
			c.wh.cancelOnServer = false
			results <- result{c, i, err}
		}()
	}
	var won *result
	var firstErr error
	for range keys {
		r := <-results
		switch {
		case r.err == nil && won == nil:
			won = &r
			cancel() // the other waits end on the server
		case r.err == nil:
			r.c.close() // granted after all: closing frees it
		default:
			if r.c != nil {
				r.c.close() // a cancelled wait may have been granted
			}
			if firstErr == nil && wctx.Err() == nil {
				firstErr = r.err
				cancel()
			}
		}
	}
	if won == nil {
		if ctx.Err() != nil {
			return nil, 0, &lock.Error{Op: "acquire", Path: s.name, Err: lock.WaitError(ctx.Err())}
		}
		return nil, 0, s.queryError(firstErr)
	}
	return won.c, won.i, nil
}

// take makes the session c, which holds slot place, a holder.
func (s *slotEntry) take(ctx context.Context, c *conn, place int, key int64, wait bool) (*slotHandle, error) {
	s.owner.StartedAt = time.Now()
	record := recordWithPlace(s.owner.Encode(), place, s.n)
	var fence int64
	var backend int32
	sent := time.Now()
	sql := takeSlotSQL
	if !wait {
		sql = takeSlotTrySQL
	}
	c.wh.cancelOnServer = wait
	err := c.c.QueryRow(ctx, sql, c.mode(sql), s.key, s.name, record, key).Scan(&fence, &backend)
	c.wh.cancelOnServer = false
	if errors.Is(err, pgx.ErrNoRows) {
		// A collision (the name's key is held, by this session), or,
		// for a try, a plain holder.
		held, herr := c.holds(ctx, s.key)
		switch {
		case herr != nil:
			return nil, s.queryError(herr)
		case held:
			return nil, s.p.collision(s.name, s.key)
		}
		return nil, s.p.busy(s.name, &lock.Error{Op: "acquire", Path: s.name, Err: lock.ErrBusy})
	}
	if err != nil {
		return nil, s.queryError(err)
	}
	owner := s.owner
	owner.Fence = uint64(fence)
	if s.logger != nil {
		s.logger.Debug("hold: acquired", "path", s.name, "slot", place, "slots", s.n, "fence", owner.Fence, "backend", backend)
	}
	h := newHandle(s.p, c, s.name, s.key, owner, backend, s.stopWithin, sent, time.Since(sent) > s.p.budget(s.stopWithin)/4)
	h.slotKey = key
	return &slotHandle{handle: h, place: place}, nil
}

// checkCount refuses the request if the semaphore's holders use another
// N: the rows of the sessions that hold the name's key shared.
func (s *slotEntry) checkCount(ctx context.Context, c *conn) error {
	holders, err := c.sharers(ctx, s.key)
	if err != nil {
		return s.queryError(err)
	}
	for _, h := range holders {
		if n := h.slots; n != 0 && n != s.n {
			return &lock.Error{Op: "acquire", Path: s.name, Err: lock.ErrSlotCount, Holder: h.Holder,
				Hint: fmt.Sprintf("it is in use as a semaphore of %d slots, and a semaphore's N is its holders' while any of them holds; ask for %d slots, or wait until no slot is held to change N", n, n)}
		}
	}
	return nil
}

// allHeld returns the busy error naming every holder if every slot is
// held, nil otherwise.
func (s *slotEntry) allHeld(ctx context.Context, c *conn) (error, error) {
	st, err := s.p.statusOn(ctx, c, s.name)
	if err != nil {
		return nil, err
	}
	held := 0
	for _, h := range st.SlotHolders {
		if h != nil {
			held++
		}
	}
	if st.Slots == 0 || held < st.Slots {
		return nil, nil
	}
	return &lock.Error{Op: "acquire", Path: s.name, Err: lock.ErrBusy, Holder: st.Holder, Hint: st.DescribeSlots()}, nil
}

// queryError turns a failed round trip into hold's error.
func (s *slotEntry) queryError(err error) error {
	var e *lock.Error
	if errors.As(err, &e) {
		return err
	}
	if isNoSchema(err) {
		return errNoSchema
	}
	return s.p.queryError("acquire", s.name, err)
}

// slotHandle is a held place: the handle of its session, with the place.
type slotHandle struct {
	*handle
	place int
}

// Slot is the place held, from 0 to N-1.
func (h *slotHandle) Slot() int { return h.place }

// placeOf reads the place and N from a semaphore holder's record.
func placeOf(record []byte) (place, slots int, ok bool) {
	var r slotRecord
	if json.Unmarshal(record, &r) != nil || r.Slot == nil || r.Slots < 2 {
		return 0, 0, false
	}
	return *r.Slot, r.Slots, true
}
