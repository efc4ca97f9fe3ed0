// Package agent is `hold agent`: it serves lock requests as JSON lines on stdin and answers on
// stdout, so that a program in any language gets hold's locks by talking to
// one child process (the Node package in js/ does). docs/agent.md is the
// protocol's reference; this package implements it. The design in brief:
//
//   - Every request carries an id of the client's choosing, echoed in its
//     reply. Requests that may wait (acquire, update, append) run in their
//     own goroutine, so any number can be outstanding; the others are
//     answered in order, at once.
//   - A lock is named by a number the agent hands out; every acquisition is
//     its own hold.Lock, so two acquisitions of one target by one client
//     exclude each other, as two processes do.
//   - The lock options are the command line's lock flags, as JSON fields:
//     a request fills the same lockspec.Spec that the flags fill, and
//     lockspec resolves both (see request.spec).
//   - End of stdin means the client is gone: every wait is abandoned, every
//     lock released, and the agent exits.
package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/internal/report"
)

// agent is the state of one `hold agent` process.
type agent struct {
	// client describes the client (--for), passed on to a sub-agent.
	client string
	// version describes this build, for hello ("hold 1.2.3 ...").
	version string

	out   *bufio.Writer
	outMu sync.Mutex
	// gone is closed when stdout fails: the client is gone.
	gone     chan struct{}
	goneOnce sync.Once

	// ctx ends when the client is gone; every wait and pending update
	// ends with it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	next    uint64
	locks   map[uint64]*heldLock
	pending map[string]context.CancelCauseFunc // by request id
	updates map[uint64]chan updateAnswer
	busy    map[lockspec.Key]time.Time // when a lock was last found busy
	remote  *subAgent                  // lazily started, for network targets (see remote.go)
	sync    *syncChannel               // the synchronous channel, once a hello asked for it

	// routes: the replies owed to requests of the synchronous channel
	// that are served as the standard channel's are (see routed), by the
	// id the agent gave them; nroutes counts them, so that send looks
	// only when there are any.
	routeMu  sync.Mutex
	routes   map[string]chan *reply
	routeSeq uint64
	nroutes  atomic.Int32
}

// errClientCancelled is the cause of a wait ended by a cancel request.
var errClientCancelled = errors.New("cancelled by the client")

// errClientGone is the cause of everything ended because the client left.
var errClientGone = errors.New("the client is gone (end of input)")

func newAgent(out io.Writer) *agent {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &agent{
		out:     bufio.NewWriter(out),
		gone:    make(chan struct{}),
		ctx:     ctx,
		cancel:  cancel,
		locks:   map[uint64]*heldLock{},
		pending: map[string]context.CancelCauseFunc{},
		updates: map[uint64]chan updateAnswer{},
		busy:    map[lockspec.Key]time.Time{},
		routes:  map[string]chan *reply{},
	}
}

// Options describe the agent to its client and to the locks it takes.
type Options struct {
	// Client describes the client (--for); a sub-agent is given it too.
	Client string
	// Version describes this build of hold, for the hello reply.
	Version string
}

// Serve answers the requests read from in on out until in ends, a write
// to out fails or terminate delivers; then it releases every lock and
// returns. The caller sets the process's signal behaviour.
func Serve(in io.Reader, out io.Writer, terminate <-chan os.Signal, opts Options) {
	clientPID() // now, while the client that started the agent runs
	a := newAgent(out)
	a.client, a.version = opts.Client, "hold "+opts.Version
	// Network locks share a kept protocol per connection and settings,
	// as a Go program's locks share its Dial's, instead of dialling one
	// each; serve releases every lock before they are closed.
	closeSessions := lockspec.KeepSessions(sessionIdle)
	defer closeSessions()
	a.serve(in, terminate)
}

// forClient words r's error for the agent's client: the library's
// missing-directory hint names every front end's option, and a Python
// or Node client (which say so in --for: "app.py, python pid 4200")
// needs its own only.
func (a *agent) forClient(r *reply) {
	e := r.Error
	if e == nil || e.Hint != flock.MissingDirHint {
		return
	}
	var how string
	switch {
	case strings.Contains(a.client, ", python pid "):
		how = "make_dirs=True"
	case strings.Contains(a.client, ", node pid "):
		how = "{ makeDirs: true }"
	default:
		return
	}
	e.Hint = flock.MissingDirHintFor(how)
	e.Message = strings.ReplaceAll(e.Message, flock.MissingDirHint, e.Hint)
}

// sessionIdle is how long a kept network protocol (a connection, an etcd
// lease) stays open with no lock using it: a program that takes a lock now
// and then reuses it, one that stopped taking locks does not keep it for
// ever.
const sessionIdle = 30 * time.Second

// serve answers the requests read from in until in ends, stdout fails or
// terminate delivers, then releases everything and returns.
func (a *agent) serve(in io.Reader, terminate <-chan os.Signal) {
	// Requests are handled on the reading goroutine itself: a hand-off to
	// another goroutine would add a wake-up to every round trip.
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		readLines(in, func(line []byte) bool {
			a.handleLine(line)
			select {
			case <-a.gone:
				return false
			default:
				return true
			}
		})
	}()
	select {
	case <-readDone:
	case <-a.gone:
	case <-terminate:
	}
	a.shutdown()
}

// handleLine parses one request and runs it.
func (a *agent) handleLine(line []byte) {
	req, bad := parseRequest(line)
	switch {
	case bad != nil:
		a.send(bad)
	case req != nil:
		a.dispatch(req)
	}
}

// dispatch runs one well-formed request: the ones that may wait in their
// own goroutine, the others at once.
func (a *agent) dispatch(req *request) {
	switch req.Op {
	case "hello":
		a.hello(req)
	case "acquire", "try":
		if a.proxied(req) {
			return
		}
		if req.Op == "try" {
			zero := 0.0
			req.Wait = &zero
		}
		a.acquire(req)
	case "status":
		if !a.proxied(req) {
			a.status(req)
		}
	case "update", "append":
		if lockspec.AddressScheme(req.Target) != "" {
			a.refuse(req.ID, &replyError{Code: codeInvalid, Message: fmt.Sprintf("%s takes a file path, not an address like %q", req.Op, req.Target)})
			return
		}
		body := a.append
		if req.Op == "update" {
			body = a.update
		}
		// An append that does not wait is served here, in order; an update
		// never is, whatever its wait: it holds its lock until the client's
		// commit, which this loop must be free to read.
		if isNonblocking(req) && req.Op == "append" {
			body(a.ctx, req)
			return
		}
		a.spawn(req.ID, func(ctx context.Context) { body(ctx, req) })
	case "release":
		a.release(req)
	case "check", "token":
		a.check(req)
	case "cancel":
		a.cancelRequest(req)
	case "inproc_record", "inproc_erase", "inproc_check":
		a.send(a.inproc(req))
	case "commit", "abort":
		a.answerUpdate(req)
	case "":
		a.refuse(req.ID, &replyError{Code: codeInvalid, Message: `request without "op"`})
	default:
		a.refuse(req.ID, &replyError{Code: codeInvalid, Message: fmt.Sprintf("unknown op %q (known: hello, acquire, try, release, check, token, status, update, commit, abort, append, cancel, inproc_record, inproc_erase, inproc_check)", req.Op)})
	}
}

func isNonblocking(req *request) bool { return req.Wait != nil && *req.Wait == 0 }

// spawn runs body in its own goroutine, registered under the request's id
// so that a cancel request can end its wait.
func (a *agent) spawn(id json.RawMessage, body func(context.Context)) {
	key := string(id)
	ctx, cancel := context.WithCancelCause(a.ctx)
	a.mu.Lock()
	_, dup := a.pending[key]
	if !dup && !a.closed {
		a.pending[key] = cancel
		a.wg.Add(1)
	}
	closed := a.closed
	a.mu.Unlock()
	switch {
	case dup:
		cancel(nil)
		a.refuse(id, &replyError{Code: codeInvalid, Message: fmt.Sprintf("id %s is already used by a pending request", key)})
		return
	case closed:
		cancel(nil)
		return // the client is gone: nobody to answer
	}
	go func() {
		defer a.wg.Done()
		defer func() {
			a.mu.Lock()
			delete(a.pending, key)
			a.mu.Unlock()
			cancel(nil)
		}()
		body(ctx)
	}()
}

// hello answers the client's hello with the version both speak: the
// client's highest, if this agent serves it, else this agent's highest.
// A client that only speaks versions older than minProtocolVersion is
// refused.
func (a *agent) hello(req *request) {
	if req.Version != 0 && req.Version < minProtocolVersion {
		a.refuse(req.ID, &replyError{Code: "EVERSION", Message: fmt.Sprintf("this agent speaks protocol versions %d to %d, the client at most %d: install matching versions", minProtocolVersion, protocolVersion, req.Version)})
		return
	}
	version := protocolVersion
	if req.Version != 0 && req.Version < version {
		version = req.Version
	}
	r := &reply{ID: req.ID, OK: true, Version: version, Agent: a.version, PID: os.Getpid()}
	if req.Sync {
		// A client that cannot have the channel (another system, a full
		// disk) is answered without it and keeps to this one.
		r.Sync = a.openSync(req.SyncDir, req.Pipeline)
	}
	a.send(r)
}

func (a *agent) status(req *request) {
	spec, err := req.resolve()
	if err != nil {
		a.answer(req.ID, err)
		return
	}
	defer spec.Close()
	st, err := spec.Inspect()
	if err != nil {
		a.answer(req.ID, err)
		return
	}
	a.send(&reply{ID: req.ID, OK: true, Status: report.NewStatus(req.Target, st)})
}

func (a *agent) cancelRequest(req *request) {
	if validID(req.Request) == nil {
		a.refuse(req.ID, &replyError{Code: codeInvalid, Message: `cancel needs "request": the id of the request to cancel`})
		return
	}
	a.mu.Lock()
	cancel, ok := a.pending[string(req.Request)]
	a.mu.Unlock()
	if ok {
		cancel(errClientCancelled)
	} else {
		ok = a.cancelRemote(req.Request)
	}
	a.send(&reply{ID: req.ID, OK: true, Cancelled: ok})
}

// shutdown ends every wait and pending update, releases every lock and
// waits for the request goroutines: the client is gone.
func (a *agent) shutdown() {
	a.mu.Lock()
	a.closed = true
	locks := a.locks
	a.locks = map[uint64]*heldLock{}
	sub := a.remote
	a.mu.Unlock()
	a.cancel(errClientGone)
	for _, al := range locks {
		if al.remote == 0 {
			al.release(0)
		}
	}
	if sub != nil {
		sub.close()
	}
	a.closeSync()
	// The request goroutines end with the context, unless one is stuck
	// writing to a client that no longer reads: do not wait for it for
	// ever (the locks are released already).
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(shutdownGrace):
	}
}

// shutdownGrace bounds how long a closing agent waits for its request
// goroutines.
const shutdownGrace = 5 * time.Second

// send writes one reply or event line. A failed write means the client
// is gone.
func (a *agent) send(r *reply) {
	if a.nroutes.Load() > 0 && a.route(r) {
		return
	}
	a.forClient(r)
	b := encodeReply(r)
	a.outMu.Lock()
	a.out.Write(b)
	err := a.out.Flush()
	a.outMu.Unlock()
	if err != nil {
		a.goneOnce.Do(func() { close(a.gone) })
	}
}
