package hold

import (
	"errors"
	"os"
	"time"

	"github.com/hold-dev/hold/internal/dirlock"
	"github.com/hold-dev/hold/lock"
)

// Portable returns the portable directory protocol, for use with
// WithProtocol:
//
//	dir := hold.Portable(hold.StaleAfter(30 * time.Second))
//	err := hold.Do(ctx, "data/pipeline.md", fn, hold.WithProtocol(dir))
//
// It is the lock of career-ops' dir-lock and npm's proper-lockfile, on the
// same path: "mkdir <target>.lock", an owner.json inside (pid, token,
// started_at, host, process start time, command), and a heartbeat that
// refreshes the directory's mtime every second. Use it where kernel locks
// are missing or only local (some NFS, FUSE and SMB mounts), or to share a
// lock with Node tools; otherwise prefer the default kernel lock, which
// needs no staleness rules at all.
//
// A lock outlives a holder that dies, so waiters judge it: a holder alive
// on this host is never stale, however long it holds the lock; a dead one
// (pid gone or reused) is taken over at once; a lock whose holder cannot be
// asked (no owner record, as proper-lockfile writes none; another host) is
// taken over when its heartbeat is older than StaleAfter, and never within
// OwnerlessGrace of its creation. A holder whose lock is removed or
// replaced finds out at its next heartbeat: Lock.Lost fires, the context
// Do passes to fn is cancelled, and Release returns ErrLost. Lock.Token is
// always 0: a deleted directory keeps no counter.
//
// Waiting wakes on directory events where the OS has them (inotify on
// Linux) and otherwise polls with jittered backoff up to MaxPoll. The ctx
// given to Acquire is always the hard bound. Patience adds the rule of the
// Node seeds: give up when one holder keeps the lock for a whole Patience
// window, but re-arm the window whenever the lock changes hands, so a
// waiter on a busy but healthy lock is not failed for bad luck; Ceiling
// (by default 10 × Patience) bounds that extended wait. The error says
// which bound expired and who holds the lock.
//
// Waiters of one machine queue in arrival order at a waiting gate (the
// fair queue "<lock path>.gate.queue", with no lock behind it), and only
// the one at the front contends for the directory; the holder keeps its
// place until it releases, so a release wakes exactly the next waiter. Where kernel locks do not work the gate is skipped and
// every waiter contends as the Node tools do; HOLD_DIR_GATE=0 skips it
// too. The directory remains the lock: the gate only orders the waiting.
//
// Every knob has a default, which an environment variable may override
// with a finite positive value (a Go duration such as "1.5s", or a bare
// number of milliseconds): HOLD_DIR_STALE, HOLD_DIR_HEARTBEAT,
// HOLD_DIR_GRACE, HOLD_DIR_PATIENCE, HOLD_DIR_CEILING, HOLD_DIR_MAX_POLL.
// An option given here wins over the environment.
//
// Create the protocol once and reuse it: it remembers which locks it holds,
// which is how it tells a lock of this process that a live handle owns from
// a leftover of this process that nobody does.
func Portable(opts ...PortableOption) Protocol {
	var c dirlock.Config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return dirlock.New(c)
}

// A PortableOption sets a timing knob of the portable protocol. A zero or
// negative duration leaves the default (or environment) value.
type PortableOption func(*dirlock.Config)

// StaleAfter sets how old a lock's heartbeat must be before a holder that
// cannot be asked (no owner record, another host) is presumed gone.
// Default 10s, proper-lockfile's default: keep it at least the stale
// setting of any Node tool sharing the lock, or hold may take a live Node
// lock. Environment: HOLD_DIR_STALE.
func StaleAfter(d time.Duration) PortableOption { return func(c *dirlock.Config) { c.Stale = d } }

// Heartbeat sets how often a holder refreshes its lock and checks it is
// still its own. Default 1s; never more than half of StaleAfter.
// Environment: HOLD_DIR_HEARTBEAT.
func Heartbeat(d time.Duration) PortableOption { return func(c *dirlock.Config) { c.Heartbeat = d } }

// OwnerlessGrace sets the floor under every age judgement: a lock (or
// reclaim guard) younger than this is never taken, however small
// StaleAfter is. Default 1s. Environment: HOLD_DIR_GRACE.
func OwnerlessGrace(d time.Duration) PortableOption {
	return func(c *dirlock.Config) { c.Grace = d }
}

// Patience sets the per-holder timeout: Acquire fails with ErrTimeout when
// the lock stayed with one holder for this long, and waits on while it
// keeps changing hands. Default: none (only ctx bounds the wait).
// Environment: HOLD_DIR_PATIENCE.
func Patience(d time.Duration) PortableOption { return func(c *dirlock.Config) { c.Patience = d } }

// Ceiling bounds a wait that Patience keeps extending. Default: 10 ×
// Patience (none without Patience). Environment: HOLD_DIR_CEILING.
func Ceiling(d time.Duration) PortableOption { return func(c *dirlock.Config) { c.Ceiling = d } }

// MaxPoll caps the backoff between attempts, the latency of a hand-off
// where directory events do not arrive (network filesystems). Default
// 50ms. Environment: HOLD_DIR_MAX_POLL.
func MaxPoll(d time.Duration) PortableOption { return func(c *dirlock.Config) { c.MaxPoll = d } }

// Break removes the lock on target when its holder is provably gone (the
// rules a waiter applies before taking a lock over), and refuses a live
// holder with an error matching ErrBusy that says who it is. With force it
// removes the lock whatever its state; the holder, if alive, finds its lock
// lost. It returns the state it found, so a caller can show the record it
// removed; nothing at the lock path is not an error (the state is Free).
//
// Only locks that can outlive their holder can be broken: the portable
// protocol's (chosen with WithProtocol, or found as a directory at the lock
// path). A kernel lock is freed by the kernel when its holder dies, so
// breaking one fails with ErrUnsupported.
func Break(target string, force bool, opts ...Option) (*Status, error) {
	c := newConfig(opts)
	path, err := c.lockPath(target)
	if err != nil {
		return nil, err
	}
	b, ok := c.protocol.(lock.Breaker)
	if !ok {
		fi, err := os.Lstat(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return &Status{Path: path, Protocol: c.protocol.Name()}, nil
		case err == nil && fi.IsDir():
			b, ok = Portable().(lock.Breaker)
		}
	}
	if !ok {
		st, _ := c.protocol.Inspect(path)
		return st, &Error{Op: "break", Path: path, Err: notBreakable{},
			Hint: "the kernel frees a " + c.protocol.Name() + " lock when its holder dies, so it is never stale; " +
				"a held one has a live holder, which `hold status` names"}
	}
	return b.Break(path, force)
}

// notBreakable is Break's cause for a kernel lock. It matches
// ErrUnsupported, the documented cause, but says what is true: locking
// works here; only breaking does not apply.
type notBreakable struct{}

func (notBreakable) Error() string        { return "a kernel lock cannot be broken" }
func (notBreakable) Is(target error) bool { return target == ErrUnsupported }

// InspectAny is Inspect that also recognises a portable lock where the
// chosen protocol finds something else at the lock path: a directory at
// "<target>.lock" is reported as a portable (dir) lock, whatever protocol
// the options chose. `hold status` uses it, so it reports either kind.
func InspectAny(target string, opts ...Option) (*Status, error) {
	st, err := Inspect(target, opts...)
	var e *Error
	if err == nil || !errors.Is(err, ErrNotRegular) || !errors.As(err, &e) {
		return st, err
	}
	if fi, lerr := os.Lstat(e.Path); lerr != nil || !fi.IsDir() {
		return st, err
	}
	return Portable().Inspect(e.Path)
}
