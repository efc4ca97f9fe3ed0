// Package hold lets processes take turns on a shared resource: a
// read-modify-write of a shared file that never loses an update, a holder
// that crashes without wedging anyone, and a lock nobody but its holder can
// delete.
//
// The default protocol is the kernel's own file lock (flock(2) on unix,
// LockFileEx on Windows) on the lock path, by default "<target>.lock" (the
// target itself when its name ends in ".lock", as flock(1) takes it). It
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
	"github.com/hold-dev/hold/lock"
)

// Owner is the record a holder publishes (see lock.Owner for its fields).
type Owner = lock.Owner

// Error is the error type of every lock operation, in the manner of
// os.PathError: match its cause with errors.Is (ErrBusy, ErrTimeout,
// fs.ErrNotExist, ...) and get at the holder with errors.As.
type Error = lock.Error

// Holder describes who holds a lock, as far as hold could find out.
type Holder = lock.Holder

// Liveness says whether a holder process still runs.
type Liveness = lock.Liveness

// The values of Liveness.
const (
	LivenessUnknown = lock.LivenessUnknown
	Alive           = lock.Alive
	Dead            = lock.Dead
)

// Status is the observed state of a lock, as Inspect reports it.
type Status = lock.Status

// State is free, held exclusive, held shared or stale.
type State = lock.State

// The values of State.
const (
	Free          = lock.Free
	HeldExclusive = lock.HeldExclusive
	HeldShared    = lock.HeldShared
	Stale         = lock.Stale
)

// Protocol is a lock implementation. The kernel lock is the default; other
// protocols (the portable directory lock, etcd, PostgreSQL, a third
// party's) are chosen with WithProtocol.
type Protocol = lock.Protocol

// Handle is one lock held through a Protocol; Lock wraps it.
type Handle = lock.Handle

// Request is what Acquire hands a Protocol.
type Request = lock.Request

// Sentinel errors, matched with errors.Is (see package lock for each).
var (
	ErrBusy         = lock.ErrBusy
	ErrTimeout      = lock.ErrTimeout
	ErrLost         = lock.ErrLost
	ErrInvalidName  = lock.ErrInvalidName
	ErrUnsupported  = lock.ErrUnsupported
	ErrNotRegular   = lock.ErrNotRegular
	ErrReleased     = lock.ErrReleased
	ErrForeign      = lock.ErrForeign
	ErrNoToken      = lock.ErrNoToken
	ErrLockIsTarget = lock.ErrLockIsTarget
	ErrDeadlock     = lock.ErrDeadlock
)

// ErrInvalidOption: an option passed to an entry point it does not apply
// to (see Option for where each applies, and lock.ErrInvalidOption).
var ErrInvalidOption = lock.ErrInvalidOption
