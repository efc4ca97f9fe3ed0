package hold

import (
	"io/fs"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hold-dev/hold/internal/deadlock"
	"github.com/hold-dev/hold/internal/fairq"
	"github.com/hold-dev/hold/internal/proc"
)

// An Option changes how a lock is taken, inspected or broken, or what
// Update and Append may do to their file. The options, by concern: where
// the lock is (LockFile, Named, ForRewrite); how it is taken
// (WithProtocol, Shared, Slots, Fair, StopWithin, StaleAfter,
// RefuseMachineLocal);
// the lock file it creates (MakeDirs, LockFileMode, SoftFile); a wait that could
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
//   - Shared and Slots apply to Acquire, TryAcquire and Do (Update and
//     Append take the exclusive lock);
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
	// dl is what the deadlock checks need (FailIfHeldHere,
	// FailIfHeldBy, DeadlockAfter, the caller a wait is made for, and
	// the watch of the request made last, which acquire gives its wait).
	dl deadlock.Config
	// stale: see lock.Request.Stale (StaleAfter).
	stale time.Duration
	// heartbeat and lostIfTouched are Heartbeat's and LostIfTouched's.
	heartbeat     time.Duration
	lostIfTouched bool
	// makeDirs, mode: see lock.Request.MakeDirs and Mode (MakeDirs,
	// LockFileMode).
	makeDirs bool
	mode     fs.FileMode
	// softFile: see lock.Request.SoftFile (SoftFile).
	softFile bool
	// slots: the number of slots of the semaphore asked for (Slots);
	// slotsSet: Slots was given.
	slots    int
	slotsSet bool
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
	c.dl.Protocol, c.dl.Fair = c.protocol, c.fair
}

// fairProtocol puts the FIFO queue in front of p (Fair).
func fairProtocol(p Protocol) Protocol {
	if p.Name() == "etcd" {
		return p
	}
	return fairq.New(p)
}

// request turns the options and target into what the protocol is handed.
func (c *config) request(target string) (*Request, error) {
	if err := c.refuseNUL(target); err != nil {
		return nil, err
	}
	if err := c.refuseSlots(target); err != nil {
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
	// The request and its deadlock watch are one allocation (see
	// deadlock.Watched).
	w := &deadlock.Watched{Request: Request{Path: path, Shared: c.shared, Owner: proc.SelfShared(), Logger: c.logger, BeforeCreate: before,
		Explicit: c.explicit(target), StopWithin: c.stopWithin, Stale: c.stale,
		Heartbeat: c.heartbeat, LostIfTouched: c.lostIfTouched,
		MakeDirs: c.makeDirs, Mode: c.mode, SoftFile: c.softFile, FenceAbove: c.fenceAbove(target), Slots: c.slots}}
	req := &w.Request
	c.shapeOwner(&req.Owner)
	c.dl.Watch(w)
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

// The options about where the lock is (see Option).

// LockFile uses exactly path as the lock path, instead of the one derived
// from the target ("<target>.lock"), and locks nothing else: a target
// whose name ends in ".lock" is then not locked itself.
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
	return Option{kind: optLockFile, set: func(c *config) { c.lockFile = path; c.name = ""; c.named = false }}
}

// Named puts the lock in this user's private lock directory under name, for
// locks that guard something other than one file ("deploy", "nightly-db"):
// the file "<name>.lock" there, or "<name>" for a name that ends in ".lock"
// (so "deploy" and "deploy.lock" are one lock).
// A name is one component of at most 64 characters from a-z, 0-9, '.', '_'
// and '-', starting with a letter or digit; anything else fails with
// ErrInvalidName before the disk is touched. See NamedDir for where the
// directory is: the same for every process of the user, whatever its
// environment.
//
// While the lock is held (and while Acquire waits for it), the holder
// also keeps a shared flock(2) on that directory, so that
// systemd-tmpfiles, which skips a directory it cannot lock, never ages
// the lock file away. Earlier versions of hold kept named locks in
// $XDG_RUNTIME_DIR/hold or else in hold-UID in the temp directory, so
// that the same name from cron and from a login shell were two locks. A
// named lock also takes the lock of the same name at those places when a
// lock file is there (it waits for it, or TryAcquire reports it busy,
// naming the holder): an older hold still holding the name is never
// joined by a second holder. Inspect reports such a holder too.
func Named(name string) Option {
	return Option{kind: optNamed, set: func(c *config) { c.name = name; c.named = true; c.lockFile = "" }}
}

// ForRewrite says the holder will change target itself, as Update and
// Append do (and `hold update`, `hold append` and the agent's update and
// append, which pass it): target is then a data file.
//
// Its lock path is "<target>.lock", as for every holder, "x.lock.lock"
// for "x.lock". A target whose name ends in ".lock" ("x.lock", which
// flock(1) locks) is locked itself too, as every holder of it does; with
// ForRewrite that lock is in addition checked to still name the file (Check
// fails if someone else replaced it), and held until the change is
// published. (A kernel locker of hold that was granted the old inode after
// the rename finds it replaced and locks the new file instead; flock(1)
// and other tools do not check, so a flock(1) holder that opened x.lock
// before an update renamed it may hold the old inode while others use the
// new one: have such tools lock the companion, or only append to x.lock,
// which keeps its inode.) A missing x.lock is created empty for this,
// unless MustExist is given to Update or Append, and removed again when
// nothing was published. On Windows, which cannot rename over a file held
// open, Update of such a file is refused with ErrUnsupported (Append
// works); lock it apart there with LockFile.
//
// With LockFile or Named the lock is where they say and target is not
// locked itself.
func ForRewrite() Option {
	return Option{kind: optForRewrite, set: func(c *config) { c.rewrite = true }}
}

// The options about how the lock is taken (see Option).

// WithProtocol takes the lock through p instead of the kernel's file lock:
// portable.New() for a directory lock, etcd.Dial or postgres.Dial for a
// lock on a server, or a third party's lock.Protocol. Make p once and
// reuse it, since a protocol keeps state across locks (the locks it holds,
// its connection).
func WithProtocol(p Protocol) Option {
	return Option{kind: optWithProtocol, set: func(c *config) { c.protocol = p }}
}

// Fair makes this waiter wait in line: fair waiters on one lock path get the
// lock in the order they asked for it, first come, first served.
//
// Kernel locks are not fair. A process that releases a lock and asks again
// at once usually wins it back before the waiters the kernel just woke get
// to run, so when several processes loop on one lock, some wait far longer
// than others. Under Fair, waiters queue beside the lock (in the file
// "<lock path>.queue" on Linux, the directory "<lock path>.q" on other
// unix systems): each holds a kernel lock on its own ticket and sleeps on
// its predecessor's, so it wakes exactly when the waiter ahead of it is
// done, has given up, or has died; nothing polls.
//
// The lock itself is unchanged: the head of the queue takes the same lock a
// plain Acquire takes, so fair and plain waiters exclude each other, and
// flock(1) and the other tools that share the lock still see it. Only fair
// waiters are ordered, though: a plain waiter (or another tool) competes
// with the head of the queue as kernel-lock waiters always do. Every
// process that loops on a lock should use Fair to get bounded waits.
//
// A waiter that dies anywhere in the queue stalls nobody (the kernel frees
// its ticket lock, and whoever finds its ticket removes it); one whose
// context ends leaves the queue at once and its successor moves on.
// TryAcquire under Fair fails with ErrBusy while fair waiters are queued,
// even if the lock itself is momentarily free.
//
// Fair mode is implemented on unix systems; elsewhere Acquire fails with
// ErrUnsupported. It applies to local protocols (the kernel lock and the
// portable directory lock) and needs kernel locks on the filesystem of the
// queue directory; etcd locks are served in order already, so Fair leaves
// them as they are. The queue, like the lock file, stays on disk.
func Fair() Option {
	return Option{kind: optFair, set: func(c *config) { c.fair = true }}
}

// Shared asks for a shared (reader) lock: any number of shared holders may
// hold it together, and none while an exclusive holder does. A shared hold
// does not advance the fencing token; its Token is the last exclusive one.
func Shared() Option {
	return Option{kind: optShared, set: func(c *config) { c.shared = true }}
}

// Slots makes Acquire, TryAcquire and Do take one of n slots of a
// counting semaphore at the lock path, instead of the lock itself: at
// most n holders at once. A waiter takes the first slot that is free, and
// waiters are served in the order they came (nobody sleeps on a busy slot
// while another is free); TryAcquire is busy only when all n slots are
// held (or earlier waiters are queued for the next one), and its error
// names every holder. Lock.Slot says which slot is held, from 0 to n-1.
// Fencing tokens rise across all the slots of one lock path.
//
// n is part of the lock: while any slot is held, a request with another n
// fails with an error matching ErrSlotCount that names the n in use;
// when no slot is held, a new n just works. Slots(1) is the plain lock
// itself (Slot is then 0). n below 1 is refused with ErrInvalidOption.
//
// A plain lock and the slots of a semaphore at one lock path never hold
// at once: each slot holder holds the lock file shared, so a plain
// (exclusive) Acquire waits until no slot is held, and the slots wait for
// a plain holder. Shared holders (Shared) and slot holders may hold
// together; Slots and Shared together are refused.
//
// The kernel lock keeps slot k in the file "<lock path>.slotk", a kernel
// lock flock(1) can take too, and the n in use in "<lock path>.slots";
// a crashed holder's slot is free at once. The fair queue (Fair) serves
// slot waiters in one order with the lock's own fair waiters. A protocol
// that implements no lock.Semaphore refuses n above 1 with an error
// matching ErrUnsupported that names it. FailIfHeldHere and FailIfHeldBy
// look at the plain locks a process holds; a slot holder may wait for
// another slot of the same semaphore without deadlock, so they do not
// apply to a semaphore's slots.
func Slots(n int) Option {
	return Option{kind: optSlots, set: func(c *config) { c.slots, c.slotsSet = n, true }}
}

// StopWithin tells a protocol whose lock can expire (etcd's lease,
// PostgreSQL's session, the portable protocol's heartbeat) how long the
// holder needs to stop what the lock protects once it learns the lock is
// lost. Lost fires, and Check fails, at least d before the earliest moment
// the protocol could let another process take the lock, so the old work
// is over before the new holder's begins. Kernel locks cannot expire and
// ignore it. hold run passes its --kill-after grace here.
func StopWithin(d time.Duration) Option {
	return Option{kind: optStopWithin, set: func(c *config) { c.stopWithin = d }}
}

// StaleAfter sets this acquisition's stale time for a protocol that judges
// by age a holder it cannot ask (the portable protocol: a lock without an
// owner record, as proper-lockfile leaves, or one held on another host):
// such a lock is taken over once its heartbeat is older than d, and the
// lock taken is refreshed at least twice per d, so that others judging it
// by d never take it from this live holder. It overrides the protocol's
// own (portable.StaleAfter, HOLD_DIR_STALE) for this lock alone; the grace
// period still floors it. Given to Inspect, it judges the lock by d
// instead: a holder that cannot be asked whose heartbeat is older than d
// is reported Stale, as an acquisition given d would take it over. Kernel
// locks never go stale and ignore it.
func StaleAfter(d time.Duration) Option {
	return Option{kind: optStaleAfter, set: func(c *config) { c.stale = d }}
}

// Heartbeat sets how often the holder of a portable lock refreshes it
// (the lock directory's time stamp, which others judge its age by), for
// this lock alone, as proper-lockfile's `update` option does; without it
// the protocol's own (portable.Heartbeat, HOLD_DIR_HEARTBEAT, one
// second). A d longer than half the stale time is lowered to it, so that
// a live holder is never judged stale; d of 0 or less leaves the
// protocol's own. Kernel locks have no heartbeat and ignore it.
func Heartbeat(d time.Duration) Option {
	return Option{kind: optHeartbeat, set: func(c *config) { c.heartbeat = d }}
}

// LostIfTouched makes the holder of a portable lock count it lost when a
// heartbeat finds the lock directory's time stamp set by someone else, as
// proper-lockfile's holders do: Lost fires and Release returns ErrLost.
// Programs written for proper-lockfile read such a change as another
// process taking the lock; hold's own rule (a lock is lost when its
// directory is removed or replaced) does not need it. Kernel locks ignore
// it.
func LostIfTouched() Option {
	return Option{kind: optLostIfTouched, set: func(c *config) { c.lostIfTouched = true }}
}

// RefuseMachineLocal makes Acquire, TryAcquire, Do, Update and Append fail
// with the error Lock.MachineLocal reports, when the protocol is the kernel
// lock and the lock path's filesystem may keep kernel locks on this
// machine: the lock just taken is released at once, so nothing runs under
// it. For programs that would rather stop than risk two machines holding
// the lock at once.
func RefuseMachineLocal() Option {
	return Option{kind: optRefuseMachineLocal, set: func(c *config) { c.refuseMachineLocal = true }}
}

// The options about the lock file an acquisition creates (see Option).

// MakeDirs makes the lock file's missing parent directories (mode 0777
// under the umask), as Python's filelock does, instead of failing because
// the directory does not exist (an error matching fs.ErrNotExist, the
// default in Go, the hold command, Node and Python alike). Kernel locks
// honour it.
func MakeDirs() Option {
	return Option{kind: optMakeDirs, set: func(c *config) { c.makeDirs = true }}
}

// SoftFile asks the portable protocol to hold the lock as Python
// filelock's SoftFileLock does: a plain file at the lock path naming this
// process, instead of a lock directory, so that filelock's SoftFileLock in
// other processes waits for hold's holder (a directory makes it fail) and
// takes the lock over only once this process is gone, as hold takes over
// theirs. The record has no room for a fencing token (Lock.TokenError
// says so), nor for a semaphore's slots. Other protocols ignore it.
func SoftFile() Option {
	return Option{kind: optSoftFile, set: func(c *config) { c.softFile = true }}
}

// LockFileMode gives a lock file this acquisition creates the permission
// bits perm, under the umask (0666 otherwise), as filelock's mode= does.
// An existing lock file keeps its own. Kernel locks honour it.
func LockFileMode(perm fs.FileMode) Option {
	return Option{kind: optLockFileMode, set: func(c *config) { c.mode = perm.Perm() }}
}

// The options about a wait that could never end (see Option).

// FailIfHeldHere makes Acquire fail at once with an error matching
// ErrDeadlock, naming the holder, instead of waiting, when the lock is busy
// because this process itself holds it in a conflicting mode (exclusive,
// or shared while this request is exclusive). Use it where nothing in the
// process can release a lock while this call waits: a single-threaded
// program, or a synchronous caller blocked in the wait. Without it a
// process may wait for a lock that another of its goroutines holds, as
// two processes would. Do, Update and Append wait as Acquire does;
// TryAcquire, which never waits, accepts it and reports a busy lock with
// ErrBusy, so one list of options serves a try and then a wait.
func FailIfHeldHere() Option {
	return Option{kind: optFailIfHeldHere, set: func(c *config) { c.dl.HeldHere = true }}
}

// FailIfHeldBy makes Acquire fail at once with an error matching
// ErrDeadlock, naming the holder, instead of waiting, when the lock is busy
// because one of locks, still held, holds it in a conflicting mode. It is
// for a caller that holds those locks and will not release them while it
// waits: a thread of a client that knows which locks are its own (the
// Python client passes those of the calling thread), while locks of the
// process's other threads may be released meanwhile and are waited for.
// It applies where FailIfHeldHere does.
func FailIfHeldBy(locks ...*Lock) Option {
	return Option{kind: optFailIfHeldBy, set: func(c *config) {
		for _, l := range locks {
			if l != nil {
				c.dl.HeldBy = append(c.dl.HeldBy, &l.held)
			}
		}
	}}
}

// DeadlockAfter sets how long a wait for a lock lasts before it looks for
// a deadlock between processes (by default a second; 0 turns the search
// off). A wait that lasts so long says what it waits for, in an entry
// that this user's other waiters on this machine can read, and follows
// the chain of waits from the lock's holder: the holder's own wait, the
// holder of that lock, and so on. When the chain comes back to this wait,
// and does so again a moment later, the processes wait for each other
// and none can ever go on (two jobs that take two locks in opposite
// orders). Exactly one wait of the cycle, the one that began last, then
// fails with an error matching ErrDeadlock that names every process and
// lock of the cycle; the others wait on, and get their locks once that
// one's program lets go of what it holds. A wait that ends within the
// delay costs nothing for it, and so does every wait that keeps no lock
// (below) and runs under no hold run or flock(1): such a wait cannot
// close a cycle.
//
// The chain is followed through kernel locks (what the kernel says holds
// them, fair ones included, a fair waiter wherever it is in its queue)
// and portable locks of this machine (their owner records),
// through processes that wait for their command to end (hold run, flock
// run inside one another) and through hold agent's clients. A wait
// counts as keeping only the locks it provably keeps until it ends: those
// of the Do calls whose fn makes it with fn's context (a Do nested in
// another's fn), those given to FailIfHeldBy, and with FailIfHeldHere
// every lock of the process. A lock the process holds otherwise may be
// released by another goroutine while this one waits, so the chain ends
// there and no deadlock is reported through it. A process hold
// cannot see into (a flock(1) that waits) ends the chain, so no cycle
// through it is ever reported; so do a wait with a deadline (a context
// with one: it ends by itself) and a process that can act on its own
// (timeout(1), a shell with a trap: see internal/deadlock's cycle.go for the rule). The search of this machine's locks runs on
// Linux only. Locks on a server (etcd, PostgreSQL) are followed, on every
// system, by what the server knows (a protocol that implements
// lock.WaitGraph): waits of the same server user only, and a chain that
// leaves the server (for another server or this machine's locks) ends
// there, unreported. It applies where FailIfHeldHere does.
func DeadlockAfter(d time.Duration) Option {
	if d <= 0 {
		d = -1
	}
	return Option{kind: optDeadlockAfter, set: func(c *config) { c.dl.After = d }}
}

// The options about what the owner record says (see Option).

// Field adds an extra field to the owner record, shown by `hold status`.
// The record is readable by anyone who can read the lock file: keep secrets
// out of it.
func Field(key, value string) Option {
	return Option{kind: optField, set: func(c *config) {
		if c.fields == nil {
			c.fields = make(map[string]string)
		}
		c.fields[key] = value
	}}
}

// OmitCommand leaves this process's command line out of the owner record,
// so that `hold status` and waiters see the holder's pid, host and start
// time but not what it runs. The command line is recorded by default, with
// values that look like secrets masked (docs/cli.md, "What hold writes and
// deletes"); the environment variable HOLD_RECORD_COMMAND=0 leaves it out
// for every lock a process takes.
func OmitCommand() Option {
	return Option{kind: optOmitCommand, set: func(c *config) { c.omitCommand = true }}
}

// shapeOwner applies Field and OmitCommand to the owner record a request
// publishes.
func (c *config) shapeOwner(o *Owner) {
	if c.omitCommand || !proc.RecordCommand() {
		o.Command = nil
	}
	if len(c.fields) > 0 {
		o.Fields = make(map[string]string, len(c.fields))
		for k, v := range c.fields {
			o.Fields[k] = v
		}
	}
}

// The options about what Update and Append may do to their file (see Option).

// MustExist makes Update and Append fail, with an error matching
// fs.ErrNotExist, when the file does not exist, instead of reading it as
// empty (Update) or creating it (Append).
func MustExist() Option {
	return Option{kind: optMustExist, set: func(c *config) { c.mustExist = true }}
}

// AllowEmpty lets Update empty the file: without it, empty content from
// fn (nil included) is refused with an error matching ErrEmpty, and the
// file is left as it was. A missing file stays missing either way: empty
// content for it writes nothing. Append refuses it (ErrInvalidOption):
// an append adds to the file.
func AllowEmpty() Option {
	return Option{kind: optAllowEmpty, set: func(c *config) { c.allowEmpty = true }}
}

// AllowSplit lets Update replace a file that has other hard links. The
// replacement is a new file renamed over path, so the other names keep
// the old content: the link is split. Without it such a file is refused
// with ErrHardLinked. Append refuses it (ErrInvalidOption): an append
// writes in place, so it never splits a link.
func AllowSplit() Option {
	return Option{kind: optAllowSplit, set: func(c *config) { c.allowSplit = true }}
}

// AllowOwnerChange lets Update replace a file whose owner or group this
// process cannot give the replacement (only root may give a file to
// another user; only a member of a group may give it to that group). The
// replacement then belongs to this process's user, and keeps the file's
// group where this process is a member; the change is logged through
// Logger. Without it such a file is refused with ErrOwnerNotKept before fn
// is called. Append refuses it (ErrInvalidOption): an append writes in
// place, so the file keeps its owner.
func AllowOwnerChange() Option {
	return Option{kind: optAllowOwnerChange, set: func(c *config) { c.allowOwnerChange = true }}
}

// The options about debugging (see Option).

// Logger sends debug events (waiting, queued, acquired, released, lost,
// and the protocol's own steps) to l at slog.LevelDebug, and what an
// Update let happen (an owner change, a directory not synced) at
// slog.LevelWarn. Without it hold logs nothing, and pays nothing for it.
func Logger(l *slog.Logger) Option {
	return Option{kind: optLogger, set: func(c *config) { c.logger = l }}
}
