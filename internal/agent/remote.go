package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/lockspec"
)

// Network targets (etcd://...) are served by hold-remote, which links the
// backends hold leaves out (see lockspec/handoff.go). An agent run as hold cannot
// exec itself away as the command line does: it already serves other
// locks. So on the first request with such a target it starts
// `hold-remote agent` as its child, a sub-agent speaking the same
// protocol, and relays those requests to it. Request ids and lock numbers
// are rewritten on the way, so the client sees one agent with one
// numbering. The sub-agent's stdin is this agent's pipe: when this agent
// ends, however it ends, the sub-agent reads end of file and releases its
// locks (an etcd lease is revoked at once instead of expiring).

// subAgentGrace bounds how long a closing agent waits for its sub-agent to
// release its network locks before killing it.
const subAgentGrace = 10 * time.Second

// subAgent is a running `hold-remote agent`.
type subAgent struct {
	a   *agent
	cmd *exec.Cmd
	in  io.WriteCloser
	// exited is closed when the sub-agent's output has ended.
	exited chan struct{}

	// wmu serializes writes to in; it is never held with mu, so that a
	// full pipe cannot stop readReplies.
	wmu sync.Mutex

	mu      sync.Mutex
	dead    bool
	next    uint64
	waiting map[uint64]relay  // requests not yet answered, by relayed id
	ids     map[string]uint64 // relayed id of a client's pending request
	locks   map[uint64]uint64 // the client's lock number, by the sub-agent's
}

// relay is a request waiting for the sub-agent's reply.
type relay struct {
	handle    func(*reply)
	clientKey string // the client's request id, "" if it cannot be cancelled
}

// proxied relays req to the sub-agent when its target has a network scheme
// this executable does not link, and reports whether it did.
func (a *agent) proxied(req *request) bool {
	scheme := lockspec.AddressScheme(req.Target)
	if scheme == "" || !lockspec.IsRemoteScheme(scheme) {
		return false
	}
	if lockspec.Serves(scheme) {
		return false
	}
	sub, err := a.subAgent()
	if err != nil {
		a.answer(req.ID, err)
		return true
	}
	clientID := req.ID
	// A network lock's token and record come with its acquisition anyway:
	// the reply carries them, lazy or not.
	req.Lazy = false
	sub.send(req, clientID, func(r *reply) {
		r.ID = clientID
		if r.OK && r.Lock != 0 && (req.Op == "acquire" || req.Op == "try") {
			n, ok := a.addLock(&heldLock{remote: r.Lock, sub: sub})
			if !ok { // the client left meanwhile
				sub.send(&request{Op: "release", Lock: r.Lock}, nil, func(*reply) {})
				return
			}
			sub.mapLock(r.Lock, n)
			r.Lock = n
		}
		a.send(r)
	})
	return true
}

// subAgent returns the running sub-agent, starting one if there is none
// (or the last one died).
func (a *agent) subAgent() (*subAgent, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, errClientGone
	}
	if a.remote != nil && !a.remote.isDead() {
		return a.remote, nil
	}
	exe, err := lockspec.FindRemote()
	if err != nil {
		return nil, &errkind.ExecError{Cmd: lockspec.RemoteCommand, Err: fmt.Errorf("%w; network targets are served by %s, which `go install ./cmd/...` in a clone of hold installs beside hold", err, lockspec.RemoteCommand)}
	}
	args := []string{"agent"}
	if a.client != "" {
		args = append(args, "--for", a.client)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), lockspec.RemoteEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, &errkind.ExecError{Cmd: exe, Err: err}
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, &errkind.ExecError{Cmd: exe, Err: err}
	}
	if err := cmd.Start(); err != nil {
		return nil, &errkind.ExecError{Cmd: exe, Err: err}
	}
	sub := &subAgent{a: a, cmd: cmd, in: in, exited: make(chan struct{}),
		waiting: map[uint64]relay{}, ids: map[string]uint64{}, locks: map[uint64]uint64{}}
	go sub.readReplies(out)
	a.remote = sub
	return sub, nil
}

func (s *subAgent) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

func (s *subAgent) mapLock(theirs, ours uint64) {
	s.mu.Lock()
	s.locks[theirs] = ours
	s.mu.Unlock()
}

// send relays req under a new id; handle gets the reply. clientID, if not
// nil, is remembered so that the client can cancel the request.
func (s *subAgent) send(req *request, clientID json.RawMessage, handle func(*reply)) {
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		handle(subAgentGone())
		return
	}
	s.next++
	id := s.next
	r := relay{handle: handle}
	if clientID != nil {
		r.clientKey = string(clientID)
		s.ids[r.clientKey] = id
	}
	s.waiting[id] = r
	s.mu.Unlock()
	relayed := *req
	relayed.ID = json.RawMessage(fmt.Sprint(id))
	b, err := json.Marshal(&relayed)
	if err == nil {
		s.wmu.Lock()
		_, err = s.in.Write(append(b, '\n'))
		s.wmu.Unlock()
	}
	if err != nil {
		// The sub-agent is dying; readReplies answers the request.
		s.in.Close()
	}
}

// subAgentGone is the reply to a request the sub-agent can no longer answer.
func subAgentGone() *reply {
	return &reply{Error: &replyError{Code: codeLost, Message: lockspec.RemoteCommand + " agent (the sub-agent serving network targets) exited"}}
}

// readReplies relays the sub-agent's replies and events until its output
// ends; then every request it had not answered fails and every lock it
// held is reported lost.
func (s *subAgent) readReplies(out io.Reader) {
	readLines(out, func(line []byte) bool {
		var r reply
		if json.Unmarshal(line, &r) != nil {
			return true
		}
		s.mu.Lock()
		if r.Event != "" {
			n, ok := s.locks[r.Lock]
			s.mu.Unlock()
			if ok {
				r.Lock = n
				s.a.send(&r)
			}
			return true
		}
		var id uint64
		_ = json.Unmarshal(r.ID, &id)
		rl, ok := s.waiting[id]
		delete(s.waiting, id)
		if rl.clientKey != "" {
			delete(s.ids, rl.clientKey)
		}
		s.mu.Unlock()
		if ok {
			rl.handle(&r)
		}
		return true
	})
	s.mu.Lock()
	s.dead = true
	waiting := s.waiting
	s.waiting = map[uint64]relay{}
	locks := s.locks
	s.locks = map[uint64]uint64{}
	s.mu.Unlock()
	close(s.exited)
	s.cmd.Wait()
	for _, rl := range waiting {
		rl.handle(subAgentGone())
	}
	for _, n := range locks {
		if s.a.lookupLock(n) != nil {
			gone := subAgentGone()
			s.a.send(&reply{Event: "lost", Lock: n, Error: gone.Error})
		}
	}
}

// forwardRelease releases a lock the sub-agent holds for the client.
func (a *agent) forwardRelease(req *request, al *heldLock) {
	al.sub.mu.Lock()
	delete(al.sub.locks, al.remote)
	al.sub.mu.Unlock()
	a.forwardLockOp(req, al)
}

// forwardLockOp relays a release or check of lock al to the sub-agent.
func (a *agent) forwardLockOp(req *request, al *heldLock) {
	clientID := req.ID
	relayed := *req
	relayed.Lock = al.remote
	al.sub.send(&relayed, nil, func(r *reply) {
		r.ID = clientID
		r.Lock = 0
		a.send(r)
	})
}

// cancelRemote cancels a relayed request of the client; false if there is
// none.
func (a *agent) cancelRemote(clientID json.RawMessage) bool {
	a.mu.Lock()
	sub := a.remote
	a.mu.Unlock()
	if sub == nil {
		return false
	}
	sub.mu.Lock()
	id, ok := sub.ids[string(clientID)]
	sub.mu.Unlock()
	if ok {
		sub.send(&request{Op: "cancel", Request: json.RawMessage(fmt.Sprint(id))}, nil, func(*reply) {})
	}
	return ok
}

// close ends the sub-agent: end of input makes it release its locks and
// exit; one that takes longer than subAgentGrace is killed.
func (s *subAgent) close() {
	s.in.Close()
	select {
	case <-s.exited:
	case <-time.After(subAgentGrace):
		s.cmd.Process.Kill()
		<-s.exited
	}
}
