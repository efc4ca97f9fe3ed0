package dirlock

import (
	"time"

	"github.com/hold-dev/hold/lock"
)

// The capabilities hold finds in the portable protocol.
var (
	_ lock.Breaker        = (*Protocol)(nil)
	_ lock.Describer      = (*Protocol)(nil)
	_ lock.StaleInspector = (*Protocol)(nil)
)

// Inspect reports the state of the lock at path without taking it: free
// (nothing there), held, or stale (there, but its holder is gone by the
// same rules a reclaim applies), with the owner record and the holder's
// liveness.
//
// What is not a lock at all (a directory with other files, a data file:
// see content.go) is an error matching lock.ErrForeign. A semaphore is
// reported as InspectSlots reports it.
func (p *Protocol) Inspect(path string) (*lock.Status, error) {
	return p.InspectStale(path, p.cfg.Stale)
}

// InspectStale is Inspect judging a holder it cannot ask by the stale
// time staleAfter (floored at the grace period) rather than the protocol's:
// the caller's view of whether it could take the lock over, as an
// acquisition given hold.StaleAfter(stale) would judge it.
func (p *Protocol) InspectStale(path string, staleAfter time.Duration) (*lock.Status, error) {
	if _, ok := semaphoreSlots(path); ok {
		return p.InspectSlots(path)
	}
	if staleAfter <= 0 {
		staleAfter = p.cfg.Stale
	}
	st, j := p.inspectAfter(path, staleAfter)
	switch j.verdict {
	case foreign:
		return nil, foreignError("inspect", path, j.why)
	case failed:
		return nil, failedError("inspect", path, j)
	}
	return st, nil
}

func (p *Protocol) inspect(path string) (*lock.Status, judgement) {
	return p.inspectAfter(path, p.cfg.Stale)
}

func (p *Protocol) inspectAfter(path string, staleAfter time.Duration) (*lock.Status, judgement) {
	st := &lock.Status{Path: path, Protocol: "dir"}
	j := p.judgeAfter(path, staleAfter)
	switch j.verdict {
	case vanished:
		return st, j
	case stale:
		st.State = lock.Stale
	default:
		st.State = lock.HeldExclusive
	}
	st.Holder = j.holder()
	return st, j
}

// Describe explains in a few words what decided the state of the lock at
// path ("owner process is gone", "no owner record, heartbeat 3.2s old"),
// for `hold status`.
func (p *Protocol) Describe(path string) string {
	if _, ok := semaphoreSlots(path); ok {
		return p.describeSlots(path)
	}
	_, j := p.inspect(path)
	return j.why
}

// Break removes the lock at path when its holder is provably gone, by the
// same rules and under the same guard as a reclaim, and refuses a live one
// with an error matching lock.ErrBusy that names the holder. With force it
// removes the lock whatever its state (still only the object it looked
// at). It returns the state it found. A semaphore's slots are broken one
// by one (breakSlots).
func (p *Protocol) Break(path string, force bool) (*lock.Status, error) {
	if _, ok := semaphoreSlots(path); ok {
		return p.breakSlots(path, force)
	}
	st, j := p.inspect(path)
	switch j.verdict {
	case vanished:
		return st, nil
	case foreign:
		// Not even with force: it is not a lock.
		return nil, foreignError("break", path, j.why)
	case failed:
		return nil, failedError("break", path, j)
	}
	if force {
		if _, err := removeIfSame(path, j.fi, expect{token: j.token()}, nil, nil); err != nil {
			return st, &lock.Error{Op: "break", Path: path, Err: err, Holder: st.Holder}
		}
		return st, nil
	}
	if j.verdict != stale {
		return st, &lock.Error{Op: "break", Path: path, Err: lock.ErrBusy, Holder: st.Holder,
			Hint: j.why + "; --force removes it anyway"}
	}
	a := &attempt{p: p, path: path, guard: path + GuardSuffix, logger: func(string, ...any) {}, stale: p.cfg.Stale}
	out, _, err := a.contended()
	switch {
	case err != nil:
		return st, err
	case out == passBusy:
		return st, &lock.Error{Op: "break", Path: path, Err: lock.ErrBusy, Holder: a.holder(),
			Hint: "another process is reclaiming it, or it is no longer stale: " + a.seen.why}
	}
	return st, nil
}
