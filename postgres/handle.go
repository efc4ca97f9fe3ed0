package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hold-dev/hold/lock"
)

// handle is one held lock: a session holding the advisory lock of the
// name's key.
//
// The lock is ours while the session lives; the server frees it when the
// session ends, however it ends. Loss is therefore a session that ended or
// may end: the server terminated it (pg_terminate_backend, a shutdown), the
// connection broke, or the holder has not heard from the server for so long
// that the server may end the session by its own bounds (see bounds.go).
//
// One goroutine per lock, from acquisition to release, runs the
// heartbeat: a query at every period, which keeps the session from being
// ended as idle and confirms that it is alive. Each confirmed round trip
// moves the lock's deadline (see lossDeadline); when the deadline comes
// before a confirmation, the lock is declared lost. From the first call to
// Lost (Do calls it) the goroutine also reads the idle connection between
// two heartbeats, which shows at once a session the server ended. It is
// paused while Check or Release use the connection.
type handle struct {
	p    *Protocol
	c    *conn
	name string
	key  int64
	// slotKey is, for a semaphore's holder, the advisory key of its
	// slot, which its session holds beside the name's key held shared.
	slotKey int64
	owner   lock.Owner
	// backend is the server process of the session, as the session
	// itself reported it (pg_backend_pid) when it took the lock: a
	// heartbeat answered by another one went through a pooler that
	// moved the session.
	backend int32
	// stopWithin is the request's StopWithin.
	stopWithin time.Duration

	lost lock.LostState

	anchorMu sync.Mutex
	// anchor is when the last round trip the server confirmed was sent:
	// the server cannot have found the session idle, or the client
	// silent, before then.
	anchor time.Time
	// pingNow asks for a heartbeat at once (after a long wait, whose
	// grant time the client does not know precisely).
	pingNow bool

	// Until Lost is called, a timer runs the heartbeat (beat): no
	// goroutine waits, so that a short hold costs nothing on its way
	// to Release. beatMu is held while it uses the connection, and by
	// Check and Release while they do.
	beat   *time.Timer
	beatMu sync.Mutex
	wanted atomic.Bool // Lost was called: a goroutine reads the idle connection
	ended  atomic.Bool // released: never watch again

	watchMu   sync.Mutex
	stopWatch func()        // ends the running watch, nil when none runs
	watchDone chan struct{} // closed when the running watch has returned

	mu       sync.Mutex // serializes Check and Release
	released bool
	relErr   error
}

func newHandle(p *Protocol, c *conn, name string, key int64, owner lock.Owner, backend int32, stopWithin time.Duration, anchor time.Time, pingNow bool) *handle {
	h := &handle{p: p, c: c, name: name, key: key, owner: owner, backend: backend,
		stopWithin: stopWithin, anchor: anchor, pingNow: pingNow}
	h.beatMu.Lock() // a beat due at once waits for h.beat to be set
	h.beat = time.AfterFunc(time.Until(h.nextPing()), h.timedBeat)
	h.beatMu.Unlock()
	return h
}

// timedBeat is the heartbeat while nobody asked for Lost.
func (h *handle) timedBeat() {
	h.beatMu.Lock()
	defer h.beatMu.Unlock()
	if h.wanted.Load() || h.ended.Load() || h.pastDeadline() || !h.ping() {
		return
	}
	h.beat.Reset(time.Until(h.nextPing()))
}

func (h *handle) Fence() uint64 { return h.owner.Fence }

// TokenError says why a shared hold has no fencing token.
func (h *handle) TokenError() error {
	if !h.owner.Shared {
		return nil
	}
	return &lock.Error{Op: "token", Path: h.name, Err: lock.ErrNoToken,
		Hint: "a shared hold on PostgreSQL has no fencing token: readers hold together, so only exclusive holders' tokens fence writes"}
}
func (h *handle) Owner() *lock.Owner { o := h.owner; return &o }

// Lost returns the channel closed on loss, and has the watch read the
// idle connection from now on.
func (h *handle) Lost() <-chan struct{} {
	h.watchMu.Lock()
	defer h.watchMu.Unlock()
	if !h.wanted.Load() {
		h.wanted.Store(true)
		h.beat.Stop()
		h.beatMu.Lock() // a beat under way ends first
		h.beatMu.Unlock()
		h.startWatchLocked()
	}
	return h.lost.Lost()
}

// startWatchLocked starts the goroutine that reads the idle connection
// and runs the heartbeat, once Lost was called. h.watchMu is held.
func (h *handle) startWatchLocked() {
	if h.stopWatch != nil || h.ended.Load() || !h.wanted.Load() {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	h.stopWatch, h.watchDone = stop, done
	go func() {
		defer close(done)
		h.watch(ctx, true)
	}()
}

func (h *handle) stopWatchLocked() {
	if h.stopWatch != nil {
		h.stopWatch()
		<-h.watchDone
		h.stopWatch, h.watchDone = nil, nil
	}
}

// pauseWatch stops the watch, if one runs, and waits until it has let go
// of the connection; with end set, for good. The caller then holds beatMu
// while it uses the connection.
func (h *handle) pauseWatch(end bool) {
	if end {
		h.ended.Store(true)
		h.beat.Stop()
	}
	if !h.wanted.Load() {
		return
	}
	h.watchMu.Lock()
	defer h.watchMu.Unlock()
	h.stopWatchLocked()
}

// resumeWatch starts the watch again after Check.
func (h *handle) resumeWatch() {
	h.watchMu.Lock()
	defer h.watchMu.Unlock()
	h.startWatchLocked()
}

// safetyMargin is how much earlier than StopWithin asks a lock is
// declared lost: room for late timers on a loaded machine and for the
// answer to a grant to have been on its way (see acquire).
func safetyMargin(bound time.Duration) time.Duration {
	return max(2*time.Second, bound/10) + bound/20
}

// budget is how long a lock that needs stopWithin to stop may go without
// a confirmed round trip.
func (p *Protocol) budget(stopWithin time.Duration) time.Duration {
	return p.bounds.end - stopWithin - safetyMargin(p.bounds.end)
}

// errTooShort refuses a lock whose StopWithin the session timeout cannot cover.
var errTooShort = errors.New("the session timeout is too short for the time the holder needs to stop (StopWithin)")

// minBudget is the least budget a lock may have: a few round trips.
const minBudget = 500 * time.Millisecond

// lossDeadline is when the lock is declared lost unless a round trip is
// confirmed first: the earliest moment the server may end the session by
// its bounds, counted from the send time of the last confirmed round trip,
// less the time the holder needs to stop and the safety margin.
func (h *handle) lossDeadline() time.Time {
	h.anchorMu.Lock()
	defer h.anchorMu.Unlock()
	return h.anchor.Add(h.p.budget(h.stopWithin))
}

// nextPing is when the next heartbeat is due: a third of the budget after
// the last confirmed round trip, so that two can fail before the deadline.
func (h *handle) nextPing() time.Time {
	h.anchorMu.Lock()
	defer h.anchorMu.Unlock()
	if h.pingNow {
		return time.Time{}
	}
	return h.anchor.Add(max(h.p.budget(h.stopWithin)/3, 100*time.Millisecond))
}

// confirmed records a round trip the server answered, sent at sent.
func (h *handle) confirmed(sent time.Time) {
	h.anchorMu.Lock()
	defer h.anchorMu.Unlock()
	if sent.After(h.anchor) {
		h.anchor = sent
	}
	h.pingNow = false
}

// pastDeadline marks the lock lost if its deadline has passed, and says
// so.
func (h *handle) pastDeadline() bool {
	deadline := h.lossDeadline()
	if time.Now().Before(deadline) {
		return false
	}
	h.markLost(fmt.Sprintf("the server did not confirm its session in time: it may end the session (and free the lock) %s after the last confirmed round trip, and the holder was told %s before that to stop",
		h.p.bounds.end, (h.stopWithin + safetyMargin(h.p.bounds.end)).Round(time.Millisecond)))
	return true
}

// watch runs the heartbeat until ctx ends or the lock is lost; with read,
// it reads the idle connection between two heartbeats. A session that
// holds a lock and runs nothing gets nothing but its end: an error saying
// the server terminated it, or the socket closing.
func (h *handle) watch(ctx context.Context, read bool) {
	for {
		if h.pastDeadline() {
			return
		}
		wctx, cancel := context.WithDeadline(ctx, h.nextPing())
		var err error
		if read {
			err = h.c.c.PgConn().WaitForNotification(wctx)
		} else {
			<-wctx.Done()
		}
		due := wctx.Err() != nil // before cancel, which sets it
		cancel()
		if ctx.Err() != nil {
			return // paused or released
		}
		if err != nil && !due {
			h.markLost(sessionEnded(err))
			return
		}
		if !due {
			continue // a notification: tolerate it
		}
		if !h.ping() {
			return
		}
	}
}

// pingSQL is the heartbeat: it keeps the session from being idle and
// tells which server process answers.
const pingSQL = `SELECT pg_backend_pid()`

// ping runs one heartbeat, bounded by the lock's deadline (not by the
// watch's context: a query cut short would close the session). It
// reports whether the lock is still held.
func (h *handle) ping() bool {
	sent := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), earlier(h.lossDeadline(), sent.Add(h.p.reqTimeout)))
	defer cancel()
	var pid int32
	err := h.c.c.QueryRow(ctx, pingSQL, pgx.QueryExecModeSimpleProtocol).Scan(&pid)
	switch {
	case err != nil && h.pastDeadline():
		h.c.close() // the server frees the lock as soon as it sees this
		return false
	case err != nil:
		h.markLost(sessionEnded(err))
		return false
	case pid != h.backend:
		h.markLost(movedSession(h.backend, pid))
		return false
	}
	h.confirmed(sent)
	return true
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// movedSession explains a heartbeat answered by another server process.
func movedSession(was, now int32) string {
	return fmt.Sprintf("its heartbeat was answered by server process %d, not by %d, which holds the lock: the connection goes through a pooler in transaction mode (PgBouncer's pool_mode=transaction), where session advisory locks do not work; connect to the server directly or through session pooling", now, was)
}

// sessionEnded says why a session's connection failed.
func sessionEnded(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01":
			return "its database session was terminated (pg_terminate_backend or a server shutdown): " + pgErr.Message
		case "57P02", "57P03":
			return "the server is restarting or shutting down: " + pgErr.Message
		}
		return "its database session ended: " + pgErr.Message
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "the server stopped answering: " + err.Error()
	}
	return "its connection to the server broke: " + err.Error()
}

// markLost records why the lock was lost and closes Lost, once.
func (h *handle) markLost(why string) {
	h.lost.MarkLost(why)
}

func (h *handle) lostError(op string) error { return h.lost.Err(op, h.name) }

// checkSQL asks whether this session holds the advisory lock of a key
// ($1, $2: the halves pg_locks shows).
const checkSQL = `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()
	AND objsubid = 1 AND classid::bigint = $1 AND objid::bigint = $2 AND granted)`

// holds asks the server whether this session holds the advisory lock of
// key.
func (c *conn) holds(ctx context.Context, key int64) (bool, error) {
	hi, lo := keyHalves(key)
	var held bool
	err := c.c.QueryRow(ctx, checkSQL, c.mode(checkSQL), hi, lo).Scan(&held)
	return held, err
}

// Check asks the server, now, whether this session still holds the lock.
func (h *handle) Check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		if err := h.lostError("check"); err != nil {
			return err
		}
		return &lock.Error{Op: "check", Path: h.name, Err: lock.ErrReleased}
	}
	if err := h.lostError("check"); err != nil {
		return err
	}
	h.pauseWatch(false)
	h.beatMu.Lock()
	err := h.check()
	h.beatMu.Unlock()
	if err == nil {
		h.resumeWatch()
	}
	return err
}

// check is Check's round trip; h.beatMu is held.
func (h *handle) check() error {
	if h.pastDeadline() {
		return h.lostError("check")
	}
	sent := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), earlier(h.lossDeadline(), sent.Add(h.p.reqTimeout)))
	defer cancel()
	held, err := h.c.holds(ctx, h.key)
	switch {
	case err != nil && h.pastDeadline():
		h.c.close()
		return h.lostError("check")
	case err != nil && h.c.c.IsClosed():
		h.markLost(sessionEnded(err))
		return h.lostError("check")
	case err != nil:
		return h.p.queryError("check", h.name, err)
	case !held:
		h.markLost("its session no longer holds the advisory lock")
		return h.lostError("check")
	}
	h.confirmed(sent)
	return nil
}

// unlockSQL frees the advisory lock of a key ($1); unlockSharedSQL a
// shared hold of it, and the holder's record in hold_holders.
const (
	unlockSQL       = `SELECT pg_advisory_unlock($1::bigint)`
	unlockSharedSQL = `WITH gone AS (DELETE FROM hold_holders WHERE key = $1 AND backend_pid = pg_backend_pid())
	SELECT pg_advisory_unlock_shared($1::bigint)`
)

// Release unlocks and keeps the session for a later acquisition. It
// reports ErrLost (on every call) if the lock had been lost.
func (h *handle) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return h.relErr
	}
	h.released = true
	h.pauseWatch(true)
	h.beatMu.Lock()
	defer h.beatMu.Unlock()

	var err error
	h.pastDeadline() // past it, someone else may hold the lock already
	if h.lostError("release") == nil {
		ctx, cancel := h.p.rpc(context.Background())
		var unlocked bool
		var qerr error
		switch {
		case h.slotKey != 0:
			qerr = h.c.c.QueryRow(ctx, unlockSlotSQL, h.c.mode(unlockSlotSQL), h.key, h.slotKey).Scan(&unlocked)
		case h.owner.Shared:
			qerr = h.c.c.QueryRow(ctx, unlockSharedSQL, h.c.mode(unlockSharedSQL), h.key).Scan(&unlocked)
		default:
			qerr = h.c.c.QueryRow(ctx, unlockSQL, h.c.mode(unlockSQL), h.key).Scan(&unlocked)
		}
		cancel()
		switch {
		case qerr != nil && h.c.c.IsClosed():
			h.markLost(sessionEnded(qerr))
		case qerr != nil:
			// The server did not answer in time: closing the session
			// frees the lock as soon as the server sees it.
			err = h.p.queryError("release", h.name, qerr)
			if e, ok := err.(*lock.Error); ok && e.Hint == "" {
				e.Hint = "the session was closed; the server frees the lock when it sees that"
			}
		case !unlocked:
			h.markLost("its session no longer held the advisory lock")
		}
	}
	h.lost.Seal() // from here on nothing can mark it lost
	if lerr := h.lostError("release"); lerr != nil {
		h.c.close()
		h.relErr = lerr
		return lerr
	}
	if err != nil {
		h.c.close()
		return err
	}
	h.p.put(h.c)
	return nil
}
