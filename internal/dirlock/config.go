package dirlock

import (
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// The defaults of the timing knobs.
const (
	// DefaultStale is proper-lockfile's own default, so that hold and Node
	// tools sharing a lock agree on when a lock without a checkable owner
	// (proper-lockfile writes none; a holder on another host cannot be
	// asked) has been abandoned.
	DefaultStale = 10 * time.Second
	// DefaultHeartbeat refreshes the lock directory's mtime ten times per
	// DefaultStale: a holder must miss many beats in a row before any
	// reader judging by age may call it stale. proper-lockfile refreshes at
	// stale/2.
	DefaultHeartbeat = time.Second
	// DefaultGrace is the floor under every age judgement: a directory
	// created this recently is never taken, however small Stale is set,
	// because a lock between its mkdir and its owner stamp, and the reclaim
	// guard, are ownerless by construction for a moment.
	DefaultGrace = time.Second
	// DefaultMaxPoll caps the backoff between attempts. Where directory
	// events arrive (inotify), a release wakes waiters at once and polling
	// is only a fallback; where they do not (network filesystems), this is
	// the worst added latency of a hand-off.
	DefaultMaxPoll = 50 * time.Millisecond
	// ceilingFactor sets the default ceiling to this multiple of Patience,
	// as the seed does, so a caller who tunes one tunes both.
	ceilingFactor = 10
)

// The environment variables that override the defaults. Each accepts a Go
// duration ("1.5s", "250ms") or a bare number of milliseconds ("1500"). Only
// finite positive values are honoured: a negative value would lower a floor
// meant to be raised, and an infinite one would stop abandoned locks from
// ever aging out; either is misconfiguration and is ignored.
const (
	EnvStale     = "HOLD_DIR_STALE"
	EnvHeartbeat = "HOLD_DIR_HEARTBEAT"
	EnvGrace     = "HOLD_DIR_GRACE"
	EnvPatience  = "HOLD_DIR_PATIENCE"
	EnvCeiling   = "HOLD_DIR_CEILING"
	EnvMaxPoll   = "HOLD_DIR_MAX_POLL"
	// EnvGate set to "0", "off" or "false" turns the waiting gate off (see
	// Config.Ungated); it is not a duration.
	EnvGate = "HOLD_DIR_GATE"
)

// Config holds the timing knobs of the portable protocol. A zero (or
// negative) field takes its default, which the matching HOLD_DIR_*
// environment variable may override.
type Config struct {
	// Stale is how old (by the lock directory's mtime, which holders
	// refresh) a lock must be before it is taken from a holder whose
	// liveness cannot be checked: no owner record (proper-lockfile), a
	// corrupt one, a holder on another host, or a leftover of this very
	// process that no handle owns. Floored at Grace. An owner that is alive
	// on this host is never stale; a dead one is stale at once.
	Stale time.Duration
	// Heartbeat is how often a holder refreshes its lock directory's mtime
	// and checks that the lock is still its own. At most Stale/2: a larger
	// value is lowered to it. A holder shortens it further when its stale
	// time, less the time it needs to stop, leaves room for fewer than
	// four beats (see beatFor).
	Heartbeat time.Duration
	// Grace is the floor under every age judgement (see DefaultGrace). It
	// is also the age at which a reclaim guard left by a crashed reclaimer
	// is cleared.
	Grace time.Duration
	// Patience is the seed's per-holder timeout: a waiter gives up with
	// ErrTimeout once the lock has stayed with one holder (same directory,
	// same owner token) for a whole Patience window. A window in which the
	// lock changed hands is re-armed: the system is making progress and the
	// waiter was merely unlucky. Zero means no such limit; the caller's
	// context is then the only bound.
	Patience time.Duration
	// Ceiling bounds the progress-extended wait: however briskly the lock
	// changes hands, a waiter gives up this long after it started. Zero
	// means ceilingFactor × Patience when Patience is set, and none
	// otherwise. The caller's context deadline is always a bound too; the
	// earliest of the three ends the wait, and the error says which.
	Ceiling time.Duration
	// MaxPoll caps the jittered exponential backoff between attempts.
	MaxPoll time.Duration
	// Ungated turns off the waiting gate (see GateSuffix), so every local
	// waiter contends for the directory itself, as hold did before the gate
	// existed. For comparisons; the gate never fails an acquisition, so
	// there is no need to turn it off for correctness. Also set by
	// HOLD_DIR_GATE=0.
	Ungated bool
}

// Resolve returns c with every unset field filled from the environment
// (lookup, normally os.Getenv) or the defaults, and the heartbeat clamped to
// Stale/2.
func (c Config) Resolve(lookup func(string) string) Config {
	if lookup == nil {
		lookup = os.Getenv
	}
	pick := func(set time.Duration, env string, def time.Duration) time.Duration {
		if set > 0 {
			return set
		}
		if d, ok := ParseDuration(lookup(env)); ok {
			return d
		}
		return def
	}
	r := Config{
		Stale:     pick(c.Stale, EnvStale, DefaultStale),
		Heartbeat: pick(c.Heartbeat, EnvHeartbeat, DefaultHeartbeat),
		Grace:     pick(c.Grace, EnvGrace, DefaultGrace),
		Patience:  pick(c.Patience, EnvPatience, 0),
		Ceiling:   pick(c.Ceiling, EnvCeiling, 0),
		MaxPoll:   pick(c.MaxPoll, EnvMaxPoll, DefaultMaxPoll),
		Ungated:   c.Ungated || gateOff(lookup(EnvGate)),
	}
	if r.Stale < r.Grace {
		r.Stale = r.Grace
	}
	// A holder judged by age must refresh at least twice per stale window,
	// or a single late beat would let a reader call a live lock stale.
	if r.Heartbeat > r.Stale/2 {
		r.Heartbeat = r.Stale / 2
	}
	if r.Ceiling == 0 && r.Patience > 0 {
		r.Ceiling = ceilingFactor * r.Patience
	}
	return r
}

// ParseDuration reads a timing override: a Go duration or a bare number of
// milliseconds. It accepts only finite values greater than zero that fit a
// time.Duration; anything else reports ok=false.
func ParseDuration(s string) (time.Duration, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	if ms, err := strconv.ParseFloat(s, 64); err == nil {
		ns := ms * float64(time.Millisecond)
		if math.IsNaN(ns) || math.IsInf(ns, 0) || ns <= 0 || ns >= math.MaxInt64 {
			return 0, false
		}
		return time.Duration(ns), true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}

// gateOff reads HOLD_DIR_GATE: only an explicit "off" turns the gate off.
func gateOff(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "0", "off", "false", "no":
		return true
	}
	return false
}
