package hold

import (
	"errors"
	"log/slog"
	"os"
	"sync"

	"github.com/hold-dev/hold/lock"
)

// The protocols log their own steps (waiting, queued, acquired, reclaimed)
// through Request.Logger. What happens to a lock after it is handed out,
// its release and its loss, goes through Lock, whatever the protocol; the
// handle is wrapped here so that every protocol reports those two events
// the same way, and only when a Logger was given.

// loggedHandle reports the end of a lock to a logger.
type loggedHandle struct {
	Handle
	log  *slog.Logger
	path string

	lostOnce    sync.Once     // "lost" is reported once
	releaseOnce sync.Once     // so is the first Release's outcome
	done        chan struct{} // closed by the first Release: stops watchLost
}

// logged wraps h so that its release and loss are logged to l. Without a
// logger it returns h itself: nothing is paid when nobody listens.
func logged(h Handle, l *slog.Logger, path string) Handle {
	if l == nil {
		return h
	}
	lh := &loggedHandle{Handle: h, log: l, path: path, done: make(chan struct{})}
	if lost := h.Lost(); lost != nil {
		go lh.watchLost(lost)
	}
	return lh
}

// watchLost logs the loss of the lock the moment the protocol notices it
// (the portable protocol's heartbeat, etcd's lease), not only at Release.
func (h *loggedHandle) watchLost(lost <-chan struct{}) {
	select {
	case <-lost:
		h.lost("lost channel closed")
	case <-h.done:
	}
}

func (h *loggedHandle) lost(how string) {
	h.lostOnce.Do(func() { h.log.Debug("hold: lost", "path", h.path, "how", how) })
}

// Check reports a lost lock as the wrapped handle does, and logs the loss.
func (h *loggedHandle) Check() error {
	err := h.Handle.Check()
	if errors.Is(err, ErrLost) {
		h.lost("check")
	}
	return err
}

// Release releases the wrapped handle and logs the outcome of the first
// call (later ones change nothing).
func (h *loggedHandle) Release() error {
	err := h.Handle.Release()
	h.releaseOnce.Do(func() {
		switch {
		case errors.Is(err, ErrLost):
			h.lost("release")
		case err != nil:
			h.log.Debug("hold: release failed", "path", h.path, "err", err)
		default:
			h.log.Debug("hold: released", "path", h.path)
		}
		close(h.done)
	})
	return err
}

// File passes on the wrapped handle's lock file (kernel locks), so that
// Lock.File sees through the wrapper.
func (h *loggedHandle) File() *os.File {
	if f, ok := h.Handle.(lock.Filer); ok {
		return f.File()
	}
	return nil
}

// Unwrap returns the wrapped handle, for what Lock asks of a protocol's
// handle beyond the Handle interface (TokenError): loggedHandle is a
// lock.Wrapper.
func (h *loggedHandle) Unwrap() Handle { return h.Handle }
