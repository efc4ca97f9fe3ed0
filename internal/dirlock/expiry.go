package dirlock

import (
	"fmt"
	"time"

	"github.com/hold-dev/hold/lock"
)

// A lock directory another process judges by age (a holder on another
// host, or one it cannot ask) may be taken Stale after its last heartbeat.
// So a holder whose heartbeats fail must call its lock lost before then:
// early enough that what it must do once told (lock.Request.StopWithin:
// hold run stops its command) is over by Stale, with one heartbeat to
// spare for a timer that fires late and for the clocks of holder and
// judge, which both read the heartbeat's time. That moment, counted from
// the last heartbeat written, is lossAfter; a timer of its own (expire)
// fires it even while a heartbeat hangs in a filesystem call.

// minHeartbeat is the shortest heartbeat a holder shortens its own to
// (see beatFor): shorter would be a busy loop of filesystem calls.
const minHeartbeat = 50 * time.Millisecond

// beatsBeforeLoss is how many heartbeats at least fall in lossAfter (see
// beatFor): the holder's own schedule must never declare it lost. With a
// beat due at the very moment of the loss, whichever timer ran first
// would decide (a lock judged by a stale time of 2 s, beating every
// second and declared lost one second after a beat, was lost at its
// first beat); with three, a beat that runs late, or one refresh that
// fails, is ridden out.
const beatsBeforeLoss = 3

// beatFor is the heartbeat of a holder judged by the stale time stale
// that needs stopWithin to stop: the configured one, shortened if need be
// so that beatsBeforeLoss heartbeats fit in lossAfter (which is what is
// left of stale once stopWithin and one heartbeat's margin are taken
// out), never below minHeartbeat.
func (c Config) beatFor(stale, stopWithin time.Duration) time.Duration {
	beat := min(c.Heartbeat, stale/2)
	if fit := (stale - stopWithin) / (beatsBeforeLoss + 1); fit < beat {
		return max(fit, minHeartbeat)
	}
	return beat
}

// beatAsked is the heartbeat of a holder that asked for asked
// (Request.Heartbeat, proper-lockfile's update): asked itself, but at most
// half the stale time, as proper-lockfile caps it, and never so long that
// the holder's own loss deadline (lossAfter, which stays the one of the
// configured heartbeat) would come before its next beat; then the
// configured heartbeat. Never below minHeartbeat.
func (c Config) beatAsked(asked, stale, stopWithin time.Duration) time.Duration {
	beat := max(min(asked, stale/2), minHeartbeat)
	if beat >= c.lossAfter(stale, stopWithin) {
		return c.beatFor(stale, stopWithin)
	}
	return beat
}

// lossAfter is how long after its last heartbeat written a holder that
// needs stopWithin to stop declares its lock lost.
func (c Config) lossAfter(stale, stopWithin time.Duration) time.Duration {
	return stale - stopWithin - c.beatFor(stale, stopWithin)
}

// minStale is the smallest stale time with which a holder that needs
// stopWithin to stop keeps its lock by its own schedule: beatsBeforeLoss
// of the shortest heartbeats in lossAfter.
func minStale(stopWithin time.Duration) time.Duration {
	return max(stopWithin, 0) + (beatsBeforeLoss+1)*minHeartbeat
}

// checkStopWithin refuses, before anything is taken, a holder whose
// heartbeat cannot fit its stale time: one that could not stop in time
// even with the shortest heartbeat, or, needing no time to stop, whose
// stale time is too short to beat in. The stale time is what others judge
// by, so only raising it (or needing less time to stop) helps.
func (c Config) checkStopWithin(path string, stale, stopWithin time.Duration) error {
	stale = max(stale, c.Grace)
	if stale >= minStale(stopWithin) {
		return nil
	}
	if stopWithin <= 0 {
		return &lock.Error{Op: "acquire", Path: path, Err: lock.ErrUnsupported,
			Hint: fmt.Sprintf("the stale time %s is too short for a holder to refresh its lock in time (it beats every %s at the shortest); "+
				"raise the stale time (%s, or the lock's own) to at least %s (every process using this lock must agree on it)",
				stale, minHeartbeat, EnvStale, minStale(0))}
	}
	return &lock.Error{Op: "acquire", Path: path, Err: lock.ErrUnsupported,
		Hint: fmt.Sprintf("the holder needs %s to stop once its lock is lost (hold run: --kill-after plus half a second), "+
			"which does not fit in the stale time %s with the heartbeats that keep the lock: others could take the lock before it has stopped; "+
			"raise the stale time (%s, or the lock's own) to at least %s (every process using this lock must agree on it) or lower --kill-after",
			stopWithin, stale, EnvStale, minStale(stopWithin))}
}

// armExpiry starts the expiry timer, at the first heartbeat (a lock held
// for less than one beat costs no timer). Called with h.mu held.
func (h *handle) armExpiry() {
	if h.expiry == nil {
		h.expiry = time.AfterFunc(h.lossAfter-h.sinceOK(time.Now()), h.expire)
	}
}

// refreshed records a heartbeat written at t and moves the expiry on.
// Called with h.mu held.
func (h *handle) refreshed(t time.Time) {
	h.lastOK.Store(t.UnixNano())
	if h.expiry != nil {
		h.expiry.Reset(h.lossAfter)
	}
}

func (h *handle) sinceOK(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, h.lastOK.Load()))
}

// overdue marks the lock lost if its last heartbeat is lossAfter old, and
// reports whether it is. Safe without h.mu: a heartbeat may hang in the
// filesystem holding it.
func (h *handle) overdue(now time.Time) bool {
	age := h.sinceOK(now)
	if age < h.lossAfter {
		return false
	}
	why := fmt.Sprintf("the heartbeat could not refresh the lock for %s; others may take it %s after the last refresh, and the holder needs %s to stop",
		age.Round(time.Millisecond), h.stale, h.stopWithin)
	if h.lost.MarkLost(why) {
		h.leaveGate()
	}
	return true
}

// expire is the expiry timer's function.
func (h *handle) expire() {
	if h.done.Load() {
		return
	}
	now := time.Now()
	if !h.overdue(now) {
		// A heartbeat got through meanwhile: look again when the new one
		// is due to expire.
		h.expiry.Reset(h.lossAfter - h.sinceOK(now))
	}
}
