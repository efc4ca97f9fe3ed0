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

// Owner is the record a holder publishes: pid, host, a random acquisition
// id, start time, command line, fencing token and the caller's extra
// fields. Every field may be empty in a record another tool wrote.
type Owner = core.Owner

// Error is the error type of every lock operation. See core.Error's fields:
// Op, Path, Err (the cause), Holder (who holds the lock, if known) and Hint
// (what to do about it).
type Error = core.Error

// Holder describes who holds a lock: the owner record, the pids the kernel
// reports, and whether the holder is alive.
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

// Status is the observed state of a lock, as Inspect reports it.
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
// WithProtocol. A Protocol must be safe for concurrent use.
type Protocol = core.Protocol

// Handle is one lock held through a Protocol; Lock wraps it.
type Handle = core.Handle

// Request is what Acquire hands a Protocol.
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
	// ErrInvalidName: a lock name is not one lowercase path-free component.
	ErrInvalidName = core.ErrInvalidName
	// ErrUnsupported: the filesystem refuses this kind of lock.
	ErrUnsupported = core.ErrUnsupported
	// ErrNotRegular: something other than a regular file (a symlink,
	// directory, FIFO, device) sits at the lock path.
	ErrNotRegular = core.ErrNotRegular
	// ErrReleased: the lock was already released.
	ErrReleased = core.ErrReleased
)
