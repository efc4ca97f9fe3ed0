package hold

import (
	"log/slog"

	"github.com/hold-dev/hold/internal/flock"
)

// An Option changes how a lock is taken.
type Option func(*config)

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
}

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

// Shared asks for a shared (reader) lock: any number of shared holders may
// hold it together, and none while an exclusive holder does. A shared hold
// does not advance the fencing token; its Token is the last exclusive one.
func Shared() Option { return func(c *config) { c.shared = true } }

// LockFile uses exactly path as the lock path, instead of "<target>.lock".
//
// hold writes its owner record and token into a lock file only when the
// file is provably its own: empty, or holding a record of hold's, with one
// link. A file named here that holds anything else (the data file itself,
// as in flock(1)'s `flock data.json CMD`, or another tool's file) is
// locked without being written, as flock(1) locks it: the lock excludes
// every other holder, but the holder has no record and Token is 0
// (Lock.TokenError says why). To have the record and the token, lock a
// separate file.
func LockFile(path string) Option {
	return func(c *config) { c.lockFile = path; c.name = ""; c.named = false }
}

// Named puts the lock in this user's private lock directory under name, for
// locks that guard something other than one file ("deploy", "nightly-db").
// A name is one component of at most 64 characters from a-z, 0-9, '.', '_'
// and '-', starting with a letter or digit; anything else fails with
// ErrInvalidName before the disk is touched. See NamedDir for where the
// directory is.
func Named(name string) Option {
	return func(c *config) { c.name = name; c.named = true; c.lockFile = "" }
}

// Field adds an extra field to the owner record, shown by `hold status`.
// The record is readable by anyone who can read the lock file: keep secrets
// out of it.
func Field(key, value string) Option {
	return func(c *config) {
		if c.fields == nil {
			c.fields = make(map[string]string)
		}
		c.fields[key] = value
	}
}

// WithProtocol uses p instead of the kernel lock.
func WithProtocol(p Protocol) Option { return func(c *config) { c.protocol = p } }

// Logger sends debug events (waiting, queued, acquired, released, lost,
// and the protocol's own steps) to l at slog.LevelDebug. Without it
// hold logs nothing.
func Logger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// OmitCommand leaves this process's command line out of the owner record,
// so that `hold status` and waiters see the holder's pid, host and start
// time but not what it runs. The command line is recorded by default, with
// values that look like secrets masked (see the README); the environment
// variable HOLD_RECORD_COMMAND=0 leaves it out for every lock a process
// takes.
func OmitCommand() Option { return func(c *config) { c.omitCommand = true } }
