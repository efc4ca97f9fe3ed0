// Package postgres gives hold's locks on a PostgreSQL database, for
// processes on many machines that share a database.
//
// A *Protocol implements hold.Protocol, so the hold package's Acquire,
// TryAcquire, Do, Update and Inspect work on PostgreSQL once it is chosen
// with hold.WithProtocol. The lock path is the lock's name:
//
//	p, err := postgres.Dial(ctx, "postgres://app@db.example:5432/app?sslmode=verify-full")
//	if err != nil { ... }
//	defer p.Close()
//	err = hold.Do(ctx, "", func(ctx context.Context) error {
//		// ctx is cancelled if the lock is lost (session ended)
//		return deploy(ctx)
//	}, hold.WithProtocol(p), hold.LockFile("deploy"))
//
// # How a lock works
//
// A lock is a session-level advisory lock (pg_advisory_lock) on a 64-bit
// key derived from the name (see Key). Each held lock has a session of its
// own, so two acquisitions of one name exclude each other even within one
// process (a session re-enters its own advisory locks). Waiting is the
// server's lock queue: waiters are granted the lock in the order they asked,
// and nobody polls. A wait whose context ends is cancelled on the server.
//
// The acquisition also takes a fencing token from the sequence
// hold_locks_fence and writes the name, token, owner record and session
// into the table hold_locks, in the same statement and round trip as the
// lock. Tokens only grow, for every name, across clients, machines and
// server restarts. The protocol creates the sequence and the table the
// first time it needs them, if its user may (see Schema).
//
// The server frees a session's locks the moment the session ends: a
// holder that crashes, is killed, or whose connection drops frees the lock
// as soon as the server sees the connection close. A holder cut off
// without a word frees it within the session timeout (WithSessionTimeout,
// 15 s by default): every session sets idle_session_timeout and TCP
// bounds, and a held lock's heartbeat keeps it from being idle. A holder's
// Lost channel closes when its session ends under it (terminated on the
// server, a restart, the connection broken; the idle connection is read
// from the first call to Lost) and, before the server may end a silent
// session, at the send time of the last confirmed round trip plus the
// session timeout, less the request's StopWithin and a safety margin.
// Check and Release ask the server themselves. A waiter rides out a
// restart or an outage until its context ends (see WithOutageNotice).
//
// Protocol.Locks lists the locks recorded in the database with their
// holders, for tools that show every lock.
//
// # What it cannot promise
//
// A holder process or VM that is paused (SIGSTOP, a long GC pause, a VM
// suspended) runs no heartbeat and no timer: the server ends its session
// and gives the lock to another before the old holder can notice. Mutual
// exclusion of the *work* then rests on the fencing token: pass Lock.Token
// to the resource and have it refuse a token smaller than the largest it
// has seen. Behind a pooler in transaction mode session advisory locks do
// not work; a heartbeat answered by another server process declares the
// lock lost.
//
// Advisory locks belong to one database: clients must name the same
// database to share locks.
//
// # Shared locks and semaphores
//
// A shared (reader) hold is the name's advisory lock in shared mode
// (pg_advisory_lock_shared), and its owner record a row of hold_holders
// beside its session; it has no fencing token of its own. A semaphore of N
// slots (Protocol.AcquireSlot) is one advisory lock per slot behind a gate
// lock that keeps arrival order; its first waiter waits on every slot at
// once, on a session each, so that the slot of a holder whose session
// ended is its at once (see semaphore.go). A request with another N than
// the holders' fails with lock.ErrSlotCount naming it.
package postgres
