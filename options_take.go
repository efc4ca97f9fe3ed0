package hold

import "time"

// The options about how the lock is taken (see Option).

// WithProtocol takes the lock through p instead of the kernel's file lock:
// portable.New() for a directory lock, etcd.Dial or postgres.Dial for a
// lock on a server, or a third party's lock.Protocol. Make p once and
// reuse it, since a protocol keeps state across locks (the locks it holds,
// its connection).
func WithProtocol(p Protocol) Option {
	return Option{kind: optWithProtocol, set: func(c *config) { c.protocol = p }}
}

// Shared asks for a shared (reader) lock: any number of shared holders may
// hold it together, and none while an exclusive holder does. A shared hold
// does not advance the fencing token; its Token is the last exclusive one.
func Shared() Option {
	return Option{kind: optShared, set: func(c *config) { c.shared = true }}
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
// period still floors it. Kernel locks never go stale and ignore it.
func StaleAfter(d time.Duration) Option {
	return Option{kind: optStaleAfter, set: func(c *config) { c.stale = d }}
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
