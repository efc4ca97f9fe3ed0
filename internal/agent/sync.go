package agent

import (
	"encoding/json"
	"fmt"

	"github.com/hold-dev/hold/internal/lockspec"
)

// The synchronous channel. A request on the agent's standard input and its
// reply on standard output cost a Node client far more than the lock, almost
// all of it in Node's own stream machinery; a line written to a FIFO and
// echoed back on another costs a small fraction of that (the bench suite's
// Node rows give the numbers). So a client whose hello asks for it
// ("sync": true) gets the paths of two FIFOs: it writes a request to the
// first and waits for its reply on the second, holding its thread for the
// µs that a try, release or check takes, or for as long as a wait lasts
// (a synchronous client has nothing else to do meanwhile); events stay on
// the standard channel. A free
// lock then costs two such round trips; a busy one costs a failed try
// before the wait goes to the standard channel. Where FIFOs are missing
// (Windows) hello answers without the paths and the client keeps to the
// standard channel.
//
// Both channels share the agent's lock table: a lock taken on either can be
// released or checked on either.

// syncPaths are the FIFOs of the synchronous channel, in the hello reply.
type syncPaths struct {
	Requests string `json:"requests"`
	Replies  string `json:"replies"`
}

// The synchronous channel serves every request but hello. try, release and
// check of the agent's own locks are answered on its goroutine at once
// (syncDispatch); the rest, the requests that may wait (acquire, update,
// append) and the ones the standard channel serves in other ways (status,
// commit, abort, network targets), are served exactly as on the standard
// channel, with their replies routed back to the synchronous one (routed).
// The client is blocked meanwhile, so such a request waits with
// hold.FailIfHeldHere: a wait for a lock this agent holds for the same
// client, which it cannot release while blocked, fails at once as a
// deadlock.

// syncDispatch serves one request of the synchronous channel. It returns
// the reply, nil only if the client left meanwhile, and, when not nil,
// what to run once the reply is sent.
func (a *agent) syncDispatch(req *request) (r *reply, after func()) {
	switch req.Op {
	case "try":
		if lockspec.AddressScheme(req.Target) != "" {
			break
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
		case al == nil: // the sub-agent's
		case req.Op == "release":
			return replyTo(req.ID, al.release()), nil
		default:
			return replyTo(req.ID, al.l.Check()), nil
		}
	case "hello":
		return failed(req.ID, &replyError{Code: codeInvalid,
			Message: "send hello on the standard channel (stdin), not the synchronous one"}), nil
	}
	return a.routed(req), nil
}

// routed serves req as the standard channel would and returns its reply
// instead of sending it: req gets an id of the agent's own while it is
// served, which send recognises. It returns nil if the client left first.
func (a *agent) routed(req *request) *reply {
	clientID := req.ID
	ch := make(chan *reply, 1)
	a.routeMu.Lock()
	a.routeSeq++
	// A NUL in the id: no client's own id on the standard channel can
	// be mistaken for it in practice, and it never leaves the agent.
	id := fmt.Sprintf(`"\u0000sync %d"`, a.routeSeq)
	a.routes[id] = ch
	a.nroutes.Add(1)
	a.routeMu.Unlock()
	req.ID, req.syncCaller = json.RawMessage(id), true
	a.dispatch(req)
	select {
	case r := <-ch:
		r.ID = clientID
		return r
	case <-a.ctx.Done():
		a.routeMu.Lock()
		if _, ok := a.routes[id]; ok {
			delete(a.routes, id)
			a.nroutes.Add(-1)
		}
		a.routeMu.Unlock()
		return failed(clientID, &replyError{Code: codeAbort, Message: "the agent is closing: its client is gone"})
	}
}

// route hands r to the synchronous channel if it answers a request that
// came there; it reports whether it did.
func (a *agent) route(r *reply) bool {
	a.routeMu.Lock()
	ch, ok := a.routes[string(r.ID)]
	if ok {
		delete(a.routes, string(r.ID))
		a.nroutes.Add(-1)
	}
	a.routeMu.Unlock()
	if ok {
		ch <- r
	}
	return ok
}

// localLock looks up lock n and takes it out of the table if take is set.
// It returns nil without an error for a lock that the sub-agent serves,
// which stays in the table for the standard channel's code to serve.
func (a *agent) localLock(n uint64, take bool) (*heldLock, *replyError) {
	a.mu.Lock()
	defer a.mu.Unlock()
	al := a.locks[n]
	switch {
	case al == nil:
		return nil, noLock(n)
	case al.remote != 0:
		return nil, nil
	}
	if take {
		delete(a.locks, n)
	}
	return al, nil
}
