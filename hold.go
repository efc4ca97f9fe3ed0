// Package hold lets processes take turns on a shared resource: a
// read-modify-write of a shared file that never loses an update, a holder
// that crashes without wedging anyone, and a lock nobody but its holder can
// delete.
//
// The default protocol is the kernel's own file lock (flock(2) on unix,
// LockFileEx on Windows) on the lock path, by default "<target>.lock". It
// interoperates with flock(1), Python's filelock, gofrs/flock and Go's
// lockedfile on the same path. The kernel frees the lock of a process that
// dies, so there is nothing to go stale.
//
//	err := hold.Do(ctx, "data/tracker.md", func(ctx context.Context) error {
//		// only one process at a time runs this
//		return appendRow("data/tracker.md")
//	})
//
// Every error from this package that concerns a lock is an *Error: it names
// the operation, the lock path and the cause, matches the sentinel errors
// (ErrBusy, ErrTimeout, ...) with errors.Is, and, when the lock was held by
// someone else, describes that holder: its pid, command, host, how long it
// has held the lock, and whether it is still alive.
package hold

import (
	"github.com/hold-dev/hold/internal/core"
)

// Owner is the record a holder publishes. Its fields, with their JSON
// names (pid, token and started_at are career-ops' dir-lock names, so the
// two read each other's records):
//
//	PID       int               "pid"         holder's process id on Host
//	Host      string            "host"        holder's host name
//	ID        string            "token"       random id of this one acquisition
//	StartedAt time.Time         "started_at"  when the lock was acquired
//	ProcStart uint64            "proc_start"  process start time (tells a reused pid)
//	PIDNS     uint64            "pid_ns"      the pid's namespace (Linux; portable protocol)
//	BootID    string            "boot_id"     the machine's boot (Linux; portable protocol)
//	Command   []string          "command"     holder's command line
//	Fence     uint64            "fence"       fencing token (see Lock.Token)
//	Shared    bool              "shared"      a shared (reader) hold
//	Released  bool              "released"    the holder has let go: a leftover record
//	Protocol  string            "protocol"    "flock", "dir" or "etcd"
//	Fields    map[string]string "fields"      the caller's extra fields (Field)
//
// Every field may be empty in a record another tool wrote. Held(now)
// returns how long the holder has held the lock.
type Owner = core.Owner

// Error is the error type of every lock operation, in the manner of
// os.PathError. Its fields:
//
//	Op     string   the operation: "acquire", "release", "update", "append", ...
//	Path   string   the lock path (or the file, for update and append)
//	Err    error    the cause: a sentinel below or an OS error (Unwrap returns it)
//	Holder *Holder  who holds the lock, when the error is about contention
//	Hint   string   what to do about it, when hold knows
//
// Match the cause with errors.Is (ErrBusy, ErrTimeout, fs.ErrNotExist, ...)
// and get at the holder with errors.As.
type Error = core.Error

// Holder describes who holds a lock, as far as hold could find out:
//
//	Owner    *Owner          the owner record; nil when missing or unreadable
//	PIDs     []int           the pids the kernel says hold it (Linux /proc/locks)
//	Alive    Liveness        whether the recorded holder still runs
//	Commands map[int]string  command lines of PIDs, where known
//
// Its String method gives the phrase error messages use, e.g. "pid 4242
// (hold run -- make) on host a1 for 12.4s, alive".
type Holder = core.Holder

// Liveness says whether a holder process still runs: Alive, Dead or
// LivenessUnknown (for example a holder on another host).
type Liveness = core.Liveness

// The values of Liveness.
const (
	LivenessUnknown = core.LivenessUnknown
	Alive           = core.Alive
	Dead            = core.Dead
)

// Status is the observed state of a lock, as Inspect reports it:
//
//	Path     string   the lock path
//	Protocol string   the protocol of the lock found there
//	State    State    Free, HeldExclusive, HeldShared or Stale
//	Holder   *Holder  who holds it; for a free lock, the last record, if any
//	Fence    uint64   the last fencing token handed out on this lock path
type Status = core.Status

// State is free, held exclusive, held shared or stale.
type State = core.State

// The values of State.
const (
	Free          = core.Free
	HeldExclusive = core.HeldExclusive
	HeldShared    = core.HeldShared
	Stale         = core.Stale
)

// Protocol is a lock implementation. The kernel lock is the default; other
// protocols (the portable directory lock, etcd) are chosen with
// WithProtocol. A Protocol must be safe for concurrent use. Its methods:
//
//	Name() string
//	Acquire(ctx context.Context, req *Request) (Handle, error)
//	TryAcquire(req *Request) (Handle, error)
//	Inspect(path string) (*Status, error)
//
// Acquire must return promptly when ctx ends, with an *Error whose cause
// matches ErrTimeout or context.Canceled, and must never leave the lock held
// by an abandoned wait; TryAcquire returns an *Error matching ErrBusy, with
// the Holder, when the lock is taken.
type Protocol = core.Protocol

// Handle is one lock held through a Protocol; Lock wraps it and its
// methods mean what Lock's do: Fence() uint64 (Lock.Token), Owner() *Owner,
// Lost() <-chan struct{}, Check() error and Release() error.
type Handle = core.Handle

// Request is what Acquire hands a Protocol:
//
//	Path     string        the lock path (for etcd, the key)
//	Shared   bool          a shared (reader) hold
//	Owner    Owner         who asks; the protocol fills StartedAt, Fence, Shared, Protocol (and ID when empty)
//	Logger   *slog.Logger  debug events, when the caller asked for them
//	Explicit bool          the caller named the lock path (LockFile): a file hold did not create
//	                       is then locked without being written, rather than refused (ErrForeign)
type Request = core.Request

// Sentinel errors, matched with errors.Is.
var (
	// ErrBusy: the lock is held by someone else and the caller did not wait.
	ErrBusy = core.ErrBusy
	// ErrTimeout: the context's deadline passed while waiting. An error
	// that matches it also matches context.DeadlineExceeded.
	ErrTimeout = core.ErrTimeout
	// ErrLost: a held lock was taken away (removed, replaced, lease expired).
	ErrLost = core.ErrLost
	// ErrInvalidName: a lock name is not one lowercase path-free component,
	// or a target names no lock path (the root directory).
	ErrInvalidName = core.ErrInvalidName
	// ErrUnsupported: the filesystem refuses this kind of lock.
	ErrUnsupported = core.ErrUnsupported
	// ErrNotRegular: something other than a regular file (a symlink,
	// directory, FIFO, device) sits at the lock path.
	ErrNotRegular = core.ErrNotRegular
	// ErrReleased: the lock was already released.
	ErrReleased = core.ErrReleased
	// ErrForeign: the lock path holds something hold did not create (a
	// data file, another tool's file, a hard link, a directory with other
	// content). hold never writes into it nor deletes it; see LockFile
	// for locking such a file the way flock(1) does.
	ErrForeign = core.ErrForeign
	// ErrNoToken: a held lock has no fencing token (see Lock.TokenError).
	ErrNoToken = core.ErrNoToken
	// ErrLockIsTarget: Update or Append was asked to lock the very file
	// it changes (LockFile naming the target). Nothing is written.
	ErrLockIsTarget = core.ErrLockIsTarget
)
