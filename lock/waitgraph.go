package lock

import (
	"context"
	"time"
)

// Deadlocks between processes whose locks live on a server (etcd,
// PostgreSQL). hold's search for a cycle of waits
// (internal/deadlock/cycle.go) follows holder → that holder's wait → … by what this
// machine can see for its own locks; for a server's locks only the server
// knows who holds and who waits. A protocol that can say so implements
// WaitGraph, and tells hold how a wait says on the server what it waits
// for through ServerWatcher: the search itself, its rules (a cycle seen
// twice a moment apart, the youngest wait gives up, the message naming
// every process and lock) stay hold's.

// ServerWatcher is a WaitWatcher (Request.Watch) that can also be told how
// the wait says on its server what it waits for. A protocol that
// implements WaitGraph calls WaitingOn in place of Waiting when the
// request's Watch implements it.
type ServerWatcher interface {
	WaitWatcher
	// WaitingOn is Waiting for a wait that publish can say on the server:
	// publish, called at most once and only if the wait lasts, writes the
	// wait's entry, claiming the locks of keeps that are the protocol's
	// own (the held locks this wait keeps until it ends: their holders
	// cannot let go before; each the protocol's own Handle, with no
	// Wrapper around it), and returns the ServerWait.ID the entry is
	// listed under and the function that removes it (called once the
	// wait ends). publish must stay valid after the wait ended: it then
	// fails or writes an entry nobody trusts.
	WaitingOn(ctx context.Context, publish PublishWait) context.Context
}

// PublishWait is what a protocol gives ServerWatcher.WaitingOn: it writes
// the wait's entry on the server (see WaitingOn).
type PublishWait func(ctx context.Context, keeps []Handle) (id string, remove func(), err error)

// WatchServerWait starts the watch w (a Request.Watch) of a wait that
// publish can say on the server, and returns the context the wait is to
// use: ctx itself when w is nil, WaitingOn's when w is a ServerWatcher,
// and Waiting's otherwise (a watcher that cannot read the server's waits
// still bounds the wait). It is the one place a WaitGraph protocol
// decides which watch a wait gets.
func WatchServerWait(ctx context.Context, w WaitWatcher, publish PublishWait) context.Context {
	switch w := w.(type) {
	case nil:
		return ctx
	case ServerWatcher:
		return w.WaitingOn(ctx, publish)
	default:
		return w.Waiting(ctx)
	}
}

// WaitGraph is implemented by protocols whose server can list the waits of
// this server user (the etcd user, the PostgreSQL role) that have said
// what they wait for (ServerWatcher), with who holds the lock each waits
// for.
type WaitGraph interface {
	// ServerWaits lists the published waits that are still waiting. An
	// entry written by another server user is never listed; neither is one
	// whose wait the server no longer shows (it ended, or its waiter's
	// lease or session did).
	ServerWaits(ctx context.Context) ([]ServerWait, error)
}

// ServerWait is one published wait, as the server shows it.
type ServerWait struct {
	// ID names the wait among the others while it lasts.
	ID string
	// Waiter is who waits: its pid, start time, host and command, as its
	// owner records name it.
	Waiter Owner
	// Path is the lock it waits for, and Shared whether it waits to share
	// it.
	Path   string
	Shared bool
	// Order places the start of the wait among the others', by the
	// server's clock or counter: the greater, the later.
	Order int64
	// Blockers names, in the server's terms (an etcd key, a PostgreSQL
	// session), each hold of Path that the wait waits for.
	Blockers []string
	// Holds names, in the same terms, the holds on the server that the
	// wait keeps (its entry's claim, as far as the server confirms it):
	// a blocker that one of them names cannot be let go before this wait
	// ends.
	Holds []string
	// Place names, in the same terms, the wait's own place in its lock's
	// queue: a reader queued behind this waiting writer waits for it (its
	// one Blocker is this Place).
	Place string
	// Deadline is when the wait gives up by itself (its context's
	// deadline, as its entry says), zero for a wait without one: a
	// chain of waits that reaches a bounded wait ends there.
	Deadline time.Time
}
