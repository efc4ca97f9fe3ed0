package lockspec

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/lockpath"
	"github.com/hold-dev/hold/lock"
	"github.com/hold-dev/hold/portable"
)

// InspectAny is hold.Inspect that also recognises a portable lock where
// the chosen protocol finds something else at the lock path: a directory
// at "<target>.lock" is reported as a portable (dir) lock, whatever
// protocol the options chose, so that `hold status`, `hold ls` and
// `hold break` report either kind.
func InspectAny(target string, opts ...hold.Option) (*hold.Status, error) {
	return inspectAny(target, 0, opts)
}

// inspectAny is InspectAny judging a holder that cannot be asked by the
// stale time stale (hold.StaleAfter; zero: the protocol's own), the
// portable lock it finds instead included.
func inspectAny(target string, stale time.Duration, opts []hold.Option) (*hold.Status, error) {
	if stale > 0 {
		opts = append(opts[:len(opts):len(opts)], hold.StaleAfter(stale))
	}
	st, err := hold.Inspect(target, opts...)
	var e *hold.Error
	if err == nil || !errors.Is(err, hold.ErrNotRegular) || !errors.As(err, &e) || !lockpath.IsDirLock(e.Path) {
		return st, err
	}
	return portable.New().InspectStale(e.Path, stale)
}

// Inspect reports the lock's state without taking it (InspectAny). A
// stale time given (Spec.Stale) judges a holder hold cannot ask by it, as
// the acquisition would.
func (r *Resolved) Inspect() (*hold.Status, error) {
	return inspectAny(r.Target, r.stale, r.Opts[:r.naming])
}

// lockedApart reports who holds a kernel lock on the file r.Target itself
// when that lock is not the one r takes. flock(1)'s `flock F CMD` locks
// F, while hold locks "F.lock" for a target F, so the two do not exclude
// each other; hold run tells its user so, and that --lock-file F shares
// flock(1)'s lock.
//
// It returns nil when F's kernel lock is free, when F is missing or not a
// regular file, and when the request takes that lock anyway or locks
// elsewhere by choice: a target whose name ends in ".lock" (locked itself
// too), --lock-file, --name, an address, or a protocol with its own
// namespace. Like hold.Inspect, it creates nothing, and for the instant
// its probe holds F's lock, a non-blocking attempt elsewhere may find F
// busy.
func (r *Resolved) lockedApart() (*hold.Status, error) {
	if r.Key.LockFile != "" || r.Key.Name != "" || r.Target == "" || lockpath.IsOwn(r.Target) || AddressScheme(r.Target) != "" {
		return nil, nil
	}
	if _, ok := r.Proto.(lock.Namer); ok {
		return nil, nil
	}
	p, err := filepath.EvalSymlinks(r.Target)
	if err != nil {
		return nil, nil
	}
	if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
		return nil, nil
	}
	st, err := hold.DefaultProtocol().Inspect(p)
	if err != nil || st.State == hold.Free {
		return nil, err
	}
	return st, nil
}
