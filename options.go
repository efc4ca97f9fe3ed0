package hold

import (
	"io/fs"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hold-dev/hold/internal/proc"
)

// An Option changes how a lock is taken, inspected or broken, or what
// Update and Append may do to their file. The options, by concern: where
// the lock is (LockFile, Named, ForRewrite); how it is taken
// (WithProtocol, Shared, Fair, StopWithin, StaleAfter, RefuseMachineLocal);
// the lock file it creates (MakeDirs, LockFileMode); a wait that could
// never end (FailIfHeldHere, FailIfHeldBy); what its owner record says
// (Field, OmitCommand); what Update and Append may do to the file
// (MustExist, AllowEmpty, AllowSplit, AllowOwnerChange); and debugging
// (Logger). They apply in order, so a later option wins over an earlier
// one that sets the same thing. An Option is opaque: only these
// functions make one, and the zero Option does nothing.
//
// Each entry point refuses, with an *Error matching ErrInvalidOption, an
// option that does not apply to it, instead of ignoring it:
//
//   - LockFile, Named, ForRewrite, WithProtocol, Fair and Logger apply
//     everywhere (Acquire, TryAcquire, Do, Update, Append, Inspect,
//     Break), so that one list of them names one lock;
//   - Shared applies to Acquire, TryAcquire and Do (Update and Append
//     take the exclusive lock);
//   - the other options about taking the lock and its record apply to
//     Acquire, TryAcquire, Do, Update and Append;
//   - MustExist applies to Update and Append; AllowEmpty, AllowSplit
//     and AllowOwnerChange to Update.
type Option struct {
	// set is what the option does to the config.
	set func(*config)
	// kind is the option's row in the table of where it applies
	// (accepts).
	kind optionKind
}

// config is what the options set, read by every entry point (Acquire,
// Inspect, Update, ...) through configFor.
type config struct {
	shared   bool
	lockFile string
	name     string
	// named: Named was given (possibly with an empty, hence invalid, name).
	named    bool
	fields   map[string]string
	protocol Protocol
	// base is the protocol without the fair queue in front (named locks
	// take their earlier places' locks through it).
	base   Protocol
	logger *slog.Logger
	// mustExist: Update and Append fail on a missing file (MustExist).
	mustExist bool
	// allowSplit, allowOwnerChange: what Update may change besides the
	// content (AllowSplit, AllowOwnerChange).
	allowSplit, allowOwnerChange bool
	// allowEmpty: Update may write empty content (AllowEmpty).
	allowEmpty bool
	// fair: wait in the FIFO queue in front of the protocol (Fair).
	fair bool
	// beforeCreate: see lock.Request.BeforeCreate (set by guarded).
	beforeCreate func() error
	// omitCommand: leave the command line out of the owner record.
	omitCommand bool
	// refuseMachineLocal: fail where kernel locks may stay on this
	// machine (RefuseMachineLocal).
	refuseMachineLocal bool
	// stopWithin: see lock.Request.StopWithin (StopWithin).
	stopWithin time.Duration
	// rewrite: the holder replaces or writes the target (ForRewrite).
	rewrite bool
	// failIfHeldHere: a wait for a lock this process holds is a deadlock
	// (FailIfHeldHere).
	failIfHeldHere bool
	// heldBy: a wait for a lock one of these holds is a deadlock
	// (FailIfHeldBy).
	heldBy []*Lock
	// caller: the program this process asks for (proc.WithCaller on
	// the context of the wait).
	caller int
	// stale: see lock.Request.Stale (StaleAfter).
	stale time.Duration
	// makeDirs, mode: see lock.Request.MakeDirs and Mode (MakeDirs,
	// LockFileMode).
	makeDirs bool
	mode     fs.FileMode
}

// configFor applies opts for the entry point in, refusing one that does
// not apply to it (see accepts; target names the lock in the error), and
// then the defaults that depend on all of them: the kernel lock when no
// protocol was chosen, and the fair queue in front of whichever protocol
// was, so that Fair works in any position.
func configFor(in entry, target string, opts []Option) (*config, error) {
	c := &config{}
	for _, o := range opts {
		if o.set == nil {
			continue
		}
		if accepts[o.kind].in&in == 0 {
			return nil, refuseOption(in, target, o.kind)
		}
		o.set(c)
	}
	c.defaults()
	return c, nil
}

// defaults sets what depends on all the options (see configFor). With no
// options it is the whole config: Acquire and TryAcquire then keep theirs
// on the stack, which applying an option (a call through a func value)
// would move to the heap.
func (c *config) defaults() {
	if c.protocol == nil {
		c.protocol = DefaultProtocol()
	}
	c.base = c.protocol
	if c.fair {
		c.protocol = fairProtocol(c.protocol)
	}
}

// request turns the options and target into what the protocol is handed.
func (c *config) request(target string) (*Request, error) {
	if err := c.refuseNUL(target); err != nil {
		return nil, err
	}
	path, err := c.lockPath(target)
	if err != nil {
		return nil, err
	}
	// The owner's ID is left to the protocol: a kernel lock needs it only
	// once its record is written, which a short hold never does.
	before := c.beforeCreate
	if before == nil && c.lockFile == "" && !c.named {
		before = specialTargetCheck(target)
	}
	req := &Request{Path: path, Shared: c.shared, Owner: proc.SelfShared(), Logger: c.logger, BeforeCreate: before,
		Explicit: c.explicit(target), StopWithin: c.stopWithin, Stale: c.stale,
		MakeDirs: c.makeDirs, Mode: c.mode, FenceAbove: c.fenceAbove(target)}
	c.shapeOwner(&req.Owner)
	return req, nil
}

// specialTargetCheck returns the BeforeCreate of a request for target:
// refuseSpecialTarget(target). The function made for the last target
// asked is kept and handed out again for the same target, so that a
// process taking one lock in a loop does not make one per acquisition:
// it depends on nothing but the target, and is only ever called.
func specialTargetCheck(target string) func() error {
	if s := lastSpecialCheck.Load(); s != nil && s.target == target {
		return s.check
	}
	s := &specialCheck{target: target, check: func() error { return refuseSpecialTarget(target) }}
	lastSpecialCheck.Store(s)
	return s.check
}

// specialCheck is a target and its refuseSpecialTarget.
type specialCheck struct {
	target string
	check  func() error
}

var lastSpecialCheck atomic.Pointer[specialCheck]
