package core

import "github.com/hold-dev/hold/lock"

// The contract's types, under the names hold's protocols have always used.
type (
	Owner    = lock.Owner
	Holder   = lock.Holder
	Liveness = lock.Liveness
	Error    = lock.Error
	Request  = lock.Request
	Protocol = lock.Protocol
	Handle   = lock.Handle
	State    = lock.State
	Status   = lock.Status
)

// The values of Liveness and State.
const (
	LivenessUnknown = lock.LivenessUnknown
	Alive           = lock.Alive
	Dead            = lock.Dead

	Free          = lock.Free
	HeldExclusive = lock.HeldExclusive
	HeldShared    = lock.HeldShared
	Stale         = lock.Stale
)

// The contract's sentinel errors.
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
)

// WaitError is lock.WaitError.
func WaitError(ctxErr error) error { return lock.WaitError(ctxErr) }
