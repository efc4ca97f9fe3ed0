package postgres

import (
	"context"
	"errors"
	"net"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hold-dev/hold/lock"
)

// handle is one held lock: a session holding the advisory lock of the
// name's key.
//
// The lock is ours while the session lives; the server frees it when the
// session ends, however it ends. Loss is therefore a broken session: the
// server terminated it (pg_terminate_backend, a shutdown), or the
// connection broke. A goroutine that reads the idle connection sees either
// at once, as the server closes the socket; it runs from the first call to
// Lost (Do calls it, a plain Acquire and Release need not) and is paused
// while Check or Release use the connection.
type handle struct {
	p     *Protocol
	c     *conn
	name  string
	key   int64
	owner lock.Owner

	lost lock.LostState

	watchMu   sync.Mutex
	wanted    bool          // Lost was called: watch whenever the session is idle
	ended     bool          // released: never watch again
	stopWatch func()        // ends the running watch, nil when none runs
	watchDone chan struct{} // closed when the running watch has returned

	mu       sync.Mutex // serializes Check and Release
	released bool
	relErr   error
}

func newHandle(p *Protocol, c *conn, name string, key int64, owner lock.Owner) *handle {
	return &handle{p: p, c: c, name: name, key: key, owner: owner}
}

func (h *handle) Fence() uint64      { return h.owner.Fence }
func (h *handle) Owner() *lock.Owner { o := h.owner; return &o }

// Lost returns the channel closed on loss, and starts watching the session.
func (h *handle) Lost() <-chan struct{} {
	h.watchMu.Lock()
	defer h.watchMu.Unlock()
	if !h.wanted {
		h.wanted = true
		h.startWatchLocked()
	}
	return h.lost.Lost()
}

// startWatchLocked starts reading the idle connection. h.watchMu is held.
func (h *handle) startWatchLocked() {
	if h.stopWatch != nil || h.ended {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	h.stopWatch, h.watchDone = stop, done
	go func() {
		defer close(done)
		h.watch(ctx)
	}()
}

// pauseWatch stops the watch, if one runs, and waits until it has let go
// of the connection; with end set, for good. It reports whether one should
// run again afterwards.
func (h *handle) pauseWatch(end bool) bool {
	h.watchMu.Lock()
	defer h.watchMu.Unlock()
	h.ended = h.ended || end
	if h.stopWatch != nil {
		h.stopWatch()
		<-h.watchDone
		h.stopWatch, h.watchDone = nil, nil
	}
	return h.wanted
}

// resumeWatch starts the watch again after Check.
func (h *handle) resumeWatch() {
	h.watchMu.Lock()
	defer h.watchMu.Unlock()
	h.startWatchLocked()
}

// watch waits for anything the server sends on the idle connection. A
// session that holds a lock and runs nothing gets nothing but its end: an
// error saying the server terminated it, or the socket closing.
func (h *handle) watch(ctx context.Context) {
	for {
		err := h.c.c.PgConn().WaitForNotification(ctx)
		if ctx.Err() != nil {
			return // paused or released
		}
		if err != nil {
			h.markLost(sessionEnded(err))
			return
		}
		// A notification (someone's NOTIFY on a channel this session
		// does not listen to cannot arrive; tolerate it anyway).
	}
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
	resume := h.pauseWatch(false)
	ctx, cancel := h.p.rpc(context.Background())
	defer cancel()
	held, err := h.c.holds(ctx, h.key)
	switch {
	case err != nil && h.c.c.IsClosed():
		h.markLost(sessionEnded(err))
		return h.lostError("check")
	case err != nil:
		return h.p.queryError("check", h.name, err)
	case !held:
		h.markLost("its session no longer holds the advisory lock")
		return h.lostError("check")
	}
	if resume {
		h.resumeWatch()
	}
	return nil
}

// unlockSQL frees the advisory lock of a key ($1).
const unlockSQL = `SELECT pg_advisory_unlock($1::bigint)`

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

	var err error
	if h.lostError("release") == nil {
		ctx, cancel := h.p.rpc(context.Background())
		var unlocked bool
		qerr := h.c.c.QueryRow(ctx, unlockSQL, h.c.mode(unlockSQL), h.key).Scan(&unlocked)
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
