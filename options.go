package hold

import (
	"log/slog"
	"time"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/proc"
)

// An Option changes how a lock is taken. The options, by concern: where
// the lock is (LockFile, Named); how it is taken (WithProtocol, Shared,
// Fair, RefuseMachineLocal, StopWithin); what its owner record says (Field,
// OmitCommand); what Update and Append may do to the file (MustExist,
// AllowSplit, AllowOwnerChange); and debugging (Logger). They apply in
// order, so a later option wins over an earlier one that sets the same
// thing.
type Option func(*config)

// config is what the options set, read by every entry point (Acquire,
// Inspect, Update, ...) through newConfig.
type config struct {
	shared   bool
	lockFile string
	name     string
	// named: Named was given (possibly with an empty, hence invalid, name).
	named    bool
	fields   map[string]string
	protocol Protocol
	logger   *slog.Logger
	// mustExist: Update and Append fail on a missing file (MustExist).
	mustExist bool
	// allowSplit, allowOwnerChange: what Update may change besides the
	// content (AllowSplit, AllowOwnerChange).
	allowSplit, allowOwnerChange bool
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
}

// newConfig applies opts and then the defaults that depend on all of
// them: the kernel lock when no protocol was chosen, and the fair queue in
// front of whichever protocol was, so that Fair works in any position.
func newConfig(opts []Option) *config {
	c := &config{}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	if c.protocol == nil {
		c.protocol = flock.Protocol{}
	}
	if c.fair {
		c.protocol = fairProtocol(c.protocol)
	}
	return c
}

// request turns the options and target into what the protocol is handed.
func (c *config) request(target string) (*Request, error) {
	path, err := c.lockPath(target)
	if err != nil {
		return nil, err
	}
	// The owner's ID is left to the protocol: a kernel lock needs it only
	// once its record is written, which a short hold never does.
	req := &Request{Path: path, Shared: c.shared, Owner: proc.SelfShared(), Logger: c.logger, BeforeCreate: c.beforeCreate,
		Explicit: c.explicit(target), StopWithin: c.stopWithin}
	c.shapeOwner(&req.Owner)
	return req, nil
}
