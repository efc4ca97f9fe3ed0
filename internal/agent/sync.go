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

// A client that must not block on the channel (Node's and Python's async
// calls: their thread runs everything else) sends its requests with
// "queue". The agent then decides, here and nowhere else, what it
// answers at once and what it queues: a request it would serve as the
// standard channel does (routed) is handed to the standard channel's
// code instead, its reply to come on stdout under the request's id, and
// the channel answers {"queued":true} at once. An acquire is tried first
// as attempt decides (not when its lock was found busy a moment ago) and
// queued only if it must wait; a request for a network target is always
// queued; so are status, update, append, commit and abort, which read or
// write files. So the clients hold no rule of when to try, what is
// remote, or what was busy: they send, and wait where the agent says.

// syncDispatch serves one request of the synchronous channel. It returns
// the reply, nil only if the client left meanwhile, and, when not nil,
// what to run once the reply is sent.
func (a *agent) syncDispatch(req *request) (r *reply, after func()) {
	switch req.Op {
	case "acquire":
		if req.Queue && lockspec.AddressScheme(req.Target) == "" {
			return a.queuedAcquire(req)
		}
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
			r = closing(req.ID)
		}
		return r, after
	case "release", "check", "token":
		al, e := a.localLock(req.Lock, req.Op == "release")
		switch {
		case e != nil:
			return failed(req.ID, e), nil
		case al == nil: // the sub-agent's
		case req.Op == "release":
			return replyTo(req.ID, al.release(req.Sent)), nil
		case req.Op == "token":
			return tokenReply(req.ID, al.l), nil
		default:
			return replyTo(req.ID, al.l.Check()), nil
		}
	case "inproc_record", "inproc_erase", "inproc_check":
		return a.inproc(req), nil
	case "hello":
		return failed(req.ID, &replyError{Code: codeInvalid,
			Message: "send hello on the standard channel (stdin), not the synchronous one"}), nil
	}
	if req.Queue {
		a.dispatch(req)
		return queued(req.ID), nil
	}
	return a.routed(req), nil
}

// queuedAcquire serves an acquire sent with "queue": attempt's reply if it
// has one, else its wait started as the standard channel starts it, and
// the queued reply.
func (a *agent) queuedAcquire(req *request) (*reply, func()) {
	r, after, wait := a.attempt(req)
	if wait != nil {
		a.spawn(req.ID, wait)
		return queued(req.ID), nil
	}
	if r == nil {
		r = closing(req.ID)
	}
	return r, after
}

// queued is the synchronous channel's reply to a request whose reply
// comes on stdout.
func queued(id json.RawMessage) *reply {
	return &reply{ID: id, OK: true, Queued: true}
}

// closing answers a request of the synchronous channel that came as the
// client left.
func closing(id json.RawMessage) *reply {
	return failed(id, &replyError{Code: codeAbort, Message: "the agent is closing: its client is gone"})
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
		return closing(clientID)
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
