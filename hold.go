package hold

import (
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/lock"
)

// Owner is the record a holder publishes (an alias of lock.Owner, whose
// documentation shows its fields).
type Owner = lock.Owner

// Error is the error type of every lock operation, in the manner of
// os.PathError: match its cause with errors.Is (ErrBusy, ErrTimeout,
// fs.ErrNotExist, ...) and get at the holder with errors.As. It is an
// alias of lock.Error, whose documentation shows its fields.
type Error = lock.Error

// Holder describes who holds a lock, as far as hold could find out (an
// alias of lock.Holder, whose documentation shows its fields).
type Holder = lock.Holder

// Liveness says whether a holder process still runs (an alias of
// lock.Liveness).
type Liveness = lock.Liveness

// The values of Liveness.
const (
	LivenessUnknown = lock.LivenessUnknown
	Alive           = lock.Alive
	Dead            = lock.Dead
)

// Status is the observed state of a lock, as Inspect reports it (an
// alias of lock.Status, whose documentation shows its fields).
type Status = lock.Status

// State is free, held exclusive, held shared or stale (an alias of
// lock.State).
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
// party's) are chosen with WithProtocol. It is an alias of lock.Protocol,
// whose documentation shows its methods and how to write one.
type Protocol = lock.Protocol

// DefaultProtocol returns the protocol Acquire and the other entry points
// use when no WithProtocol option is given: the kernel lock (flock(2) on
// unix, LockFileEx on Windows), whose Name is "flock". A program that lets
// its users choose a protocol by name (hold's --protocol and
// HOLD_PROTOCOL) lists this one beside the others; passing it to
// WithProtocol changes nothing.
func DefaultProtocol() Protocol { return flock.Protocol{} }

// Handle is one lock held through a Protocol; Lock wraps it (an alias of
// lock.Handle, whose documentation shows its methods).
type Handle = lock.Handle

// Request is what Acquire hands a Protocol (an alias of lock.Request,
// whose documentation shows its fields).
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
	// ErrSlotCount: a semaphore asked for with a number of slots other
	// than the one its holders use (see Slots).
	ErrSlotCount = lock.ErrSlotCount
)

// ErrInvalidOption: an option passed to an entry point it does not apply
// to (see Option for where each applies, and lock.ErrInvalidOption).
var ErrInvalidOption = lock.ErrInvalidOption

// ErrUnavailable: the server that keeps a network lock (etcd, PostgreSQL)
// could not be reached (see lock.ErrUnavailable).
var ErrUnavailable = lock.ErrUnavailable
