package lock

import (
	"context"
	"os"
	"time"
)

// The optional capabilities of a Protocol or a Handle. hold asks for each
// with a type assertion on these names, never on an anonymous interface,
// so that a third-party protocol gains a capability by implementing the
// named interface.

// Breaker is implemented by protocols whose locks may need removing by
// hand: the portable protocol's can outlive their holder, and a server's
// lock can outlive a client that is gone (etcd, PostgreSQL). It gains the
// protocol `hold break` and hold.Break.
type Breaker interface {
	// Break removes the lock at path if its holder is provably gone, or
	// always when force is set. It returns the state it found.
	Break(path string, force bool) (*Status, error)
}

// Namer is implemented by protocols that keep named locks in a namespace of
// their own (etcd keys) rather than in the local lock directory, so that
// hold.Named("deploy") means the same lock on every machine.
type Namer interface {
	// NamedPath returns the lock path for a valid lock name.
	NamedPath(name string) string
}

// Lister is implemented by network protocols that can list the locks under
// a key prefix (etcd, PostgreSQL). It gains the protocol `hold ls` of an
// address such as etcd://host/prefix.
type Lister interface {
	// List calls each for every lock under prefix, with its state and the
	// number of waiters queued behind it.
	List(ctx context.Context, prefix string, each func(st *Status, waiters int)) error
}

// Describer is implemented by protocols whose Inspect decides a lock's
// state by rules worth explaining (the portable protocol judges staleness
// by the holder's pid, host and the lock's age). `hold status` prints what
// Describe returns beside the state.
type Describer interface {
	// Describe says, in a sentence, what decided the state of the lock at
	// path.
	Describe(path string) string
}

// StaleInspector is implemented by protocols that judge by age a holder
// they cannot ask (the portable protocol: a lock without an owner record,
// or one held on another host). It gains hold.Inspect the StaleAfter
// option: the lock's state as an acquisition given that stale time would
// judge it, a lock older than it reported Stale, not held.
type StaleInspector interface {
	// InspectStale is Inspect judging by the stale time stale (zero: the
	// protocol's own).
	InspectStale(path string, stale time.Duration) (*Status, error)
}

// Closer is implemented by protocols that keep a connection to a server
// (etcd, PostgreSQL): whoever made the protocol closes it when done. hold
// takes such a protocol's locks to live on the server rather than in this
// machine's file system, so that every attempt at one is a round trip that
// a wait's deadline must bound too.
type Closer interface {
	// Close releases what the protocol keeps open (its client, its idle
	// sessions); what it does to locks still held is the protocol's to say.
	Close() error
}

// Semaphore is implemented by protocols that can keep a lock path as a
// counting semaphore of N slots (hold.Slots, `hold run --slots N`): at most
// N holders at once; a waiter takes the first slot that is free, and
// waiters are served in the order they came, so that nobody sleeps on a
// busy slot while another is free. The N of the holders is the
// semaphore's while any slot is held: a request with another N fails with
// an *Error matching ErrSlotCount that names the N in use. A crashed
// holder's slot is free as its plain lock would be. Every slot of a path
// draws its fencing tokens from one rising sequence.
type Semaphore interface {
	// AcquireSlot is Acquire for a request whose Slots is above 1. Its
	// handle implements SlotHandle.
	AcquireSlot(ctx context.Context, req *Request) (Handle, error)
	// TryAcquireSlot is TryAcquire for such a request: ErrBusy only when
	// all slots are held, with every holder named.
	TryAcquireSlot(req *Request) (Handle, error)
	// InspectSlots reports the semaphore at path (Status.Slots and
	// SlotHolders) without taking a slot.
	InspectSlots(path string) (*Status, error)
}

// SlotHandle is implemented by the handles of semaphore slots.
type SlotHandle interface {
	// Slot is the place held, from 0 to N-1.
	Slot() int
}

// TokenReasoner is implemented by handles that can say why they have no
// fencing token. Without it, hold.Lock.TokenError says only that the
// protocol keeps none when Fence is 0.
type TokenReasoner interface {
	// TokenError returns nil when Fence is a fencing token, and otherwise
	// an *Error matching ErrNoToken whose Hint says why.
	TokenError() error
}

// Filer is implemented by handles of locks that belong to an open file
// (kernel locks). It gains hold.Lock.File, with which `hold run` passes
// the lock to the command it starts, as flock(1) does.
type Filer interface {
	// File returns the open lock file, which Release closes.
	File() *os.File
}

// FileKeeper is implemented by handles whose lock is kept by more open
// files than the one File returns: a kernel semaphore's slot is the slot
// file's lock together with shared holds of the lock file and of the count
// file. A process that hands the lock to a child process (hold run, as
// flock(1) does) hands over all of them, so that the child keeps the whole
// lock, not part of it, if the process dies.
type FileKeeper interface {
	// KeepingFiles returns the open files, besides File's, whose locks
	// this lock needs. Release closes them.
	KeepingFiles() []*os.File
}

// Discarder is implemented by handles whose lock file the acquisition may
// have created (kernel locks). It gains hold.Lock.Discard, with which a
// refused update leaves no lock file it made behind.
type Discarder interface {
	// DiscardOnRelease makes the next Release also remove the lock file,
	// when this acquisition created it and removing it is provably safe
	// (nobody else has it open); otherwise Release keeps it.
	DiscardOnRelease()
}

// Wrapper is implemented by handles that wrap another (hold's debug
// logging does), so that the capabilities of the wrapped handle are found
// through the wrapper.
type Wrapper interface {
	// Unwrap returns the wrapped handle.
	Unwrap() Handle
}
