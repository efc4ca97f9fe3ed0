package agent

import (
	"fmt"

	"github.com/hold-dev/hold/internal/lockspec"
)

// The synchronous channel. A request on the agent's standard input and its
// reply on standard output cost a Node client far more than the lock, almost
// all of it in Node's own stream machinery; a line written to a FIFO and
// echoed back on another costs a small fraction of that (the bench suite's
// Node rows give the numbers). So a client whose hello asks for it
// ("sync": true) gets the paths of two FIFOs: it writes requests that never
// wait (try, release, check) to the first and waits for each reply on the
// second, holding its thread for the µs that takes, and keeps the
// standard channel for everything that may wait and for events. A free
// lock then costs two such round trips; a busy one costs a failed try
// before the wait goes to the standard channel. Where FIFOs are missing
// (Windows) hello answers without the paths and the client keeps to the
// standard channel.
//
// Both channels share the agent's lock table: a lock taken on either can be
// released or checked on either. Locks of network targets, which the
// sub-agent serves over its own pipes, stay on the standard channel.

// syncPaths are the FIFOs of the synchronous channel, in the hello reply.
type syncPaths struct {
	Requests string `json:"requests"`
	Replies  string `json:"replies"`
}

// syncOps lists what the synchronous channel serves, for error messages.
const syncOps = "try, release and check"

// syncDispatch serves one request of the synchronous channel. It returns
// the reply and, when not nil, what to run once the reply is sent.
func (a *agent) syncDispatch(req *request) (r *reply, after func()) {
	switch req.Op {
	case "try":
		if scheme := lockspec.AddressScheme(req.Target); scheme != "" {
			return failed(req.ID, &replyError{Code: codeInvalid,
				Message: fmt.Sprintf("%s:// targets are served on the standard channel (stdin), not the synchronous one", scheme)}), nil
		}
		zero := 0.0
		req.Wait = &zero
		al, err := req.newLock()
		if err != nil {
			return replyTo(req.ID, err), nil
		}
		l, err := a.try(&al.spec)
		r, after = a.grant(req.ID, al, l, err)
		if r == nil {
			r = failed(req.ID, &replyError{Code: codeAbort, Message: "the agent is closing: its client is gone"})
		}
		return r, after
	case "release", "check":
		al, e := a.localLock(req.Lock, req.Op == "release")
		switch {
		case e != nil:
			return failed(req.ID, e), nil
		case req.Op == "release":
			return replyTo(req.ID, al.release()), nil
		default:
			return replyTo(req.ID, al.l.Check()), nil
		}
	}
	return failed(req.ID, &replyError{Code: codeInvalid,
		Message: fmt.Sprintf("the synchronous channel serves %s; send %q on the standard channel (stdin)", syncOps, req.Op)}), nil
}

// localLock looks up lock n, one of the agent's own, and takes it out of
// the table if take is set. A lock that the sub-agent serves is refused.
func (a *agent) localLock(n uint64, take bool) (*heldLock, *replyError) {
	a.mu.Lock()
	defer a.mu.Unlock()
	al := a.locks[n]
	switch {
	case al == nil:
		return nil, noLock(n)
	case al.remote != 0:
		return nil, &replyError{Code: codeInvalid,
			Message: fmt.Sprintf("lock %d is a network lock, served on the standard channel (stdin) only", n)}
	}
	if take {
		delete(a.locks, n)
	}
	return al, nil
}
