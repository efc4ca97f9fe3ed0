package lock

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"time"
)

// Request describes one acquisition, as hold hands it to a Protocol.
type Request struct {
	// Path is the lock path (for etcd, the key; for PostgreSQL, the lock
	// name).
	Path string
	// Shared asks for a shared (reader) hold instead of an exclusive one.
	Shared bool
	// Owner is the record to publish once the lock is held. The caller fills
	// in who it is (PID, Host, ProcStart, Command, Fields); the protocol
	// sets StartedAt, Fence, Shared and Protocol, and the ID (NewID) when
	// the caller left it empty. Command may be shared with other requests:
	// it is only read.
	Owner Owner
	// Logger receives debug events when the caller asked for them; nil
	// means silence.
	Logger *slog.Logger
	// BeforeCreate, when set, is called before the lock file is created,
	// and only then; its error ends the acquisition and is returned as it
	// is. Only the kernel-lock protocol calls it: Update and Append use it
	// to refuse a target that can never be written before a lock file
	// appears beside it, without a check on every call (the lock file
	// exists nearly always). With other protocols they check first.
	BeforeCreate func() error
	// Explicit says that the caller named the lock path itself (LockFile),
	// rather than letting hold derive it from a target or a name. A lock
	// file hold did not create is then locked without being written, as
	// flock(1) would lock it; a derived path holding such a file is
	// refused (ErrForeign), because the user never asked to lock it.
	Explicit bool
	// StopWithin is how long the holder needs, once told that the lock is
	// lost, to stop everything the lock protects (hold run: SIGTERM, the
	// grace period, SIGKILL, and the wait for the command's processes).
	// A protocol whose lock can expire (a lease, a heartbeat another
	// process judges by age) reports the loss (Lost, Check) at least this
	// long before the earliest moment it could grant the lock to someone
	// else, so that the old holder has stopped before a new one starts.
	// Zero asks only for the protocol's own safety margin.
	StopWithin time.Duration
	// MakeDirs asks for the lock file's missing parent directories to be
	// made (mode 0777 under the umask), as Python's filelock does, instead
	// of failing with ErrNotExist. Mode, when not zero, gives the
	// permission bits of a lock file this acquisition creates (under the
	// umask; 0666 otherwise). The kernel-lock protocol honours both;
	// others ignore them.
	MakeDirs bool
	Mode     fs.FileMode
	// SoftFile asks the portable protocol for its file form: the lock is a
	// plain file at Path, created exclusively, holding the record Python
	// filelock's SoftFileLock writes (the pid and host of the process that
	// created it), instead of a lock directory, so that filelock's own
	// SoftFileLock waits for it and takes it over only when that process is
	// gone. Such a record carries no fencing token. Other protocols ignore
	// it.
	SoftFile bool
	// Stale is this acquisition's stale time, for a protocol that judges
	// by age a holder it cannot ask (the portable protocol: a holder
	// without an owner record, or on another host): such a holder is
	// taken over once its heartbeat is older than Stale, and the lock
	// taken is refreshed often enough for others judging by it. Zero
	// means the protocol's own. Protocols that never judge by age ignore
	// it.
	Stale time.Duration
	// Heartbeat is how often this acquisition's holder refreshes its
	// lock, for a protocol with a heartbeat (the portable protocol: the
	// lock directory's time stamp), as proper-lockfile's `update` asks.
	// Zero means the protocol's own. The protocol still refreshes at
	// least twice per stale time (it lowers a longer one), so others
	// judging the lock by age never take it from a live holder.
	// Protocols without a heartbeat ignore it.
	Heartbeat time.Duration
	// LostIfTouched makes a holder of the portable protocol count its
	// lock lost when a heartbeat finds the lock directory's time stamp
	// changed by someone else since it last set it, as proper-lockfile's
	// holders do ("mtime is not ours"): for programs written for
	// proper-lockfile, which read such a change as another process having
	// taken the lock. Without it a lock is lost only when its directory
	// is removed or replaced, which is what a takeover does. Protocols
	// without a heartbeat ignore it.
	LostIfTouched bool
	// FenceAbove names a file whose owner record's token the first token
	// of a lock path that has none yet must exceed, "" for none: the file
	// a target named "*.lock" was locked as by earlier versions of hold,
	// whose tokens its companion continues. The kernel-lock protocol
	// honours it; others ignore it.
	FenceAbove string
	// Slots, when above 1, asks for one of Slots places of a counting
	// semaphore at Path rather than for the lock itself: at most Slots
	// holders at once, each told its place (SlotHandle). hold gives such a
	// request only to a protocol that implements Semaphore, through its
	// AcquireSlot and TryAcquireSlot; 0 and 1 mean a plain lock.
	Slots int
	// Watch, when set, is told when this acquisition begins to wait:
	// Acquire calls Watch.Waiting once it has found the lock busy, before
	// it blocks, and waits with the context Waiting returns in place of
	// its own, so that the watcher may end the wait (hold ends a wait
	// that is part of a deadlock between processes this way). A wait
	// that starts again within one Acquire (a fair waiter reaching the
	// lock, a lock file replaced while waited for) may call it again, and
	// gets the first call's context. TryAcquire never calls it; a
	// protocol that does not call it leaves its waits unwatched.
	Watch WaitWatcher
}

// WaitWatcher is told when an acquisition begins to wait (Request.Watch).
type WaitWatcher interface {
	// Waiting returns the context the wait is to use instead of ctx,
	// one that ends when ctx ends and possibly earlier.
	Waiting(ctx context.Context) context.Context
}

// Protocol is one way of implementing locks: kernel locks, the portable
// directory protocol, etcd, PostgreSQL, or a third party's. hold chooses
// it with hold.WithProtocol and finds what it can do beyond these methods
// through the capability interfaces (Breaker, Namer, Lister, Describer,
// Closer). Implementations must be safe for concurrent use.
type Protocol interface {
	// Name is the protocol's short name: "flock", "dir", "etcd".
	Name() string
	// Acquire blocks until the lock is held or ctx ends. When ctx ends it
	// returns promptly an *Error wrapping WaitError(ctx.Err()), and it must
	// never leave the lock held by an abandoned wait.
	Acquire(ctx context.Context, req *Request) (Handle, error)
	// TryAcquire never waits: it returns an *Error wrapping ErrBusy, with
	// the holder, when someone else holds the lock.
	TryAcquire(req *Request) (Handle, error)
	// Inspect reports the lock's state without taking it.
	Inspect(path string) (*Status, error)
}

// Handle is one held lock. hold.Lock wraps it; its optional capabilities
// are TokenReasoner, Filer and LostNotifier, found through a Wrapper too.
// LostState implements Lost, AfterLost and the ErrLost part of Check and
// Release.
type Handle interface {
	// Fence is the fencing token of this acquisition.
	Fence() uint64
	// Owner is the record this holder published.
	Owner() *Owner
	// Lost is closed when the lock is found to be no longer this holder's.
	// The protocol watches for that itself, as long as someone may wait
	// on this channel (from the first call until Release). A kernel lock
	// holds while its descriptor is open; it is lost only if its lock
	// file is removed or replaced, which its watch and its Check detect.
	Lost() <-chan struct{}
	// Check returns nil while the lock is held, an error wrapping ErrLost
	// when it was lost and one wrapping ErrReleased after Release.
	Check() error
	// Release gives the lock up. It is idempotent: a second call returns
	// nil, or ErrLost again if the lock had been lost.
	Release() error
}

// State is what Inspect found.
type State int

// The values of State.
const (
	// Free: nobody holds the lock.
	Free State = iota
	// HeldExclusive: one holder has it exclusively.
	HeldExclusive
	// HeldShared: one or more holders share it.
	HeldShared
	// Stale: the lock exists on disk but its holder is gone (portable
	// protocol only; kernel locks never go stale).
	Stale
)

// String returns "free", "held exclusive", "held shared" or "stale".
func (s State) String() string {
	switch s {
	case HeldExclusive:
		return "held exclusive"
	case HeldShared:
		return "held shared"
	case Stale:
		return "stale"
	}
	return "free"
}

// Status is the observed state of one lock.
type Status struct {
	// Path is the lock path.
	Path string
	// Protocol names the protocol of the lock found there.
	Protocol string
	// State is free, held or stale.
	State State
	// Holder is who holds it (nil when free). For a free lock with a
	// leftover record, Holder.Owner still shows the last holder.
	Holder *Holder
	// Fence is the last fencing token handed out on this lock path.
	Fence uint64
	// Slots is, for a semaphore (Request.Slots), the number of slots in
	// use, or recorded by the last holder when none is held; 0 for a plain
	// lock. SlotHolders then has one entry per slot, nil where the slot is
	// free, State is Free when no slot is held and HeldShared otherwise,
	// and Holder is the first holder found.
	Slots       int
	SlotHolders []*Holder
	// Holders names, for a lock held shared (State HeldShared, Slots 0),
	// every holder the protocol can tell apart, oldest first (etcd and
	// PostgreSQL can; kernel locks name their holders' processes in
	// Holder.PIDs instead); Holder is the first of them. Nil otherwise.
	Holders []*Holder
	// StoppedTurn describes, for a free lock whose fair queue has at its
	// front a waiter that is stopped (Ctrl-Z, SIGSTOP, a debugger) and so
	// does not take it, that waiter and when the next one passes it over:
	// "pid 4242 (hold run --fair T -- make), stopped (passed over once the
	// lock has been free for 2s)". "" otherwise. Only a fair protocol's
	// Inspect (hold.Fair) and hold.Inspect of a kernel semaphore, whose
	// waiters queue the same way, look: a waiting message says it where
	// it would otherwise say "just released".
	StoppedTurn string
}

// WaitError turns the error of a context that ended a wait into the cause an
// *Error carries: ErrTimeout (which also matches context.DeadlineExceeded)
// when the deadline passed, the context's own error otherwise.
func WaitError(ctxErr error) error {
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		return timeoutError{}
	}
	return ctxErr
}

// timeoutError is ErrTimeout that also matches context.DeadlineExceeded,
// and says only the former: "context deadline exceeded" is Go's word for
// it, not the user's.
type timeoutError struct{}

func (timeoutError) Error() string   { return ErrTimeout.Error() }
func (timeoutError) Unwrap() []error { return []error{ErrTimeout, context.DeadlineExceeded} }
