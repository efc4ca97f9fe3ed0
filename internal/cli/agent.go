package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/atomicfile"
	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/lockspec"
)

// hold agent serves lock requests as JSON lines on stdin and answers on
// stdout, so that a program in any language gets hold's locks by talking to
// one child process (the Node package in js/ does). docs/agent.md is the
// protocol's reference; this file implements it. The design in brief:
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
//     lockspec resolves both (see agentRequest.spec).
//   - End of stdin means the client is gone: every wait is abandoned, every
//     lock released, and the agent exits.

func init() {
	register(&command{
		name:    "agent",
		summary: "serve lock requests as JSON lines on stdin/stdout, for programs in other languages",
		usage:   "agent [--for DESCRIPTION]",
		help: `
Reads one JSON request per line on stdin and writes one JSON reply (or
event) per line on stdout; docs/agent.md describes the protocol. Requests
carry ids, several may be outstanding, and a wait can be cancelled. A
client may also ask, in its hello, for a synchronous channel: two FIFOs on
which requests that never wait (try, release, check) are answered in µs.

When stdin reaches end of file (the client exited or crashed), the agent
abandons its waits, releases every lock it holds and exits 0; SIGTERM does
the same. SIGINT and SIGHUP are ignored: they reach the whole process group
of a terminal, and the client decides when the agent ends.

--for describes the client (e.g. "app.js, node pid 4200"); it becomes part
of the agent's command line, which is what holder messages and 'hold
status' show for the agent's locks.`,
		run: runAgent,
	})
}

// agentVersion is the protocol version this agent speaks (docs/agent.md).
const agentVersion = 1

// maxRequestLine bounds one request line. Larger lines are answered with
// an EINVAL error and skipped, so a broken client cannot make the agent
// allocate without limit.
const maxRequestLine = 64 << 20

// The error codes of replies; docs/agent.md explains each.
const (
	codeBusy        = "EBUSY"
	codeTimeout     = "ETIMEDOUT"
	codeAbort       = "EABORT"
	codeLost        = "ELOST"
	codeInvalid     = "EINVAL"
	codeNoLock      = "ENOLOCK"
	codeNotFound    = "ENOENT"
	codeAccess      = "EACCES"
	codeNotRegular  = "ENOTREG"
	codeForeign     = "EFOREIGN"
	codeIsDir       = "EISDIR"
	codeFull        = "ENOSPC"
	codeReadOnly    = "EROFS"
	codeUnsupported = "ENOTSUP"
	codeNoExec      = "ENOEXEC"
	codeIO          = "EIO"
)

func runAgent(args []string) int {
	fs := newFlagSet("agent", true)
	fs.String("for", "", "describe the client as `DESCRIPTION` (e.g. \"app.js, node pid 4200\") in holder messages and 'hold status'")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() != 0 {
		return fail("agent", usagef("agent takes no arguments; it reads requests on stdin"), exitUsage)
	}
	terminate, stop := agentSignals()
	defer stop()
	a := newAgent(os.Stdout)
	a.client = fs.Lookup("for").Value.String()
	a.serve(os.Stdin, terminate)
	return 0
}

// agentRequest is one request line. Which fields apply depends on Op;
// docs/agent.md lists them per operation.
type agentRequest struct {
	ID json.RawMessage `json:"id"`
	Op string          `json:"op"`

	// hello: the highest version the client speaks, and whether it
	// wants the synchronous channel (agent_sync_unix.go).
	Version int  `json:"version"`
	Sync    bool `json:"sync"`

	// acquire, try, status, update, append: what to lock and how.
	Target   string            `json:"target"`
	Wait     *float64          `json:"wait"`
	Shared   bool              `json:"shared"`
	Fair     bool              `json:"fair"`
	Protocol string            `json:"protocol"`
	LockFile string            `json:"lock_file"`
	Name     string            `json:"name"`
	Fields   map[string]string `json:"fields"`
	Settings map[string]string `json:"settings"`

	// update, append
	MustExist bool `json:"must_exist"`
	// append: the bytes to append; commit: the new content (base64).
	Data []byte `json:"data"`

	// release, check: the lock's number.
	Lock uint64 `json:"lock"`
	// commit, abort: the update's number.
	Update uint64 `json:"update"`
	// cancel: the id of the request whose wait to end.
	Request json.RawMessage `json:"request"`
}

// agentReply is a reply (ID set) or an event (Event set).
type agentReply struct {
	ID    json.RawMessage `json:"id,omitempty"`
	Event string          `json:"event,omitempty"`
	OK    bool            `json:"ok"`

	// hello
	Version int        `json:"version,omitempty"`
	Agent   string     `json:"agent,omitempty"`
	PID     int        `json:"pid,omitempty"`
	Sync    *syncPaths `json:"sync,omitempty"`

	// acquire, try, update (the lock taken); lost (the lock lost).
	Lock     uint64      `json:"lock,omitempty"`
	Token    uint64      `json:"token,omitempty"`
	Path     string      `json:"path,omitempty"`
	Protocol string      `json:"protocol,omitempty"`
	Owner    *hold.Owner `json:"owner,omitempty"`

	// update: the update's number and the file's old content.
	Update uint64 `json:"update,omitempty"`
	Data   []byte `json:"data,omitempty"`
	// commit: whether the file was written (false: the content was unchanged).
	Written bool `json:"written,omitempty"`

	// status
	Status *statusReport `json:"status,omitempty"`

	// cancel: whether a pending request was found and cancelled.
	Cancelled bool `json:"cancelled,omitempty"`

	Error *agentError `json:"error,omitempty"`
}

// agentError describes a failed request or a lost lock.
type agentError struct {
	Code    string        `json:"code"`
	Message string        `json:"message"`
	Holder  *holderReport `json:"holder,omitempty"`
	Hint    string        `json:"hint,omitempty"`
}

// agent is the state of one `hold agent` process.
type agent struct {
	// client describes the client (--for), passed on to a sub-agent.
	client string

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
	locks   map[uint64]*agentLock
	pending map[string]context.CancelCauseFunc // by request id
	updates map[uint64]chan updateAnswer
	busy    map[lockspec.Key]time.Time // when a lock was last found busy
	remote  *subAgent                  // lazily started, for network targets (see agent_remote.go)
	sync    *syncChannel               // the synchronous channel, once a hello asked for it
	patrol  bool                       // the patrol of kernel locks runs (see patrolLocks)
}

// agentLock is a lock the client holds: one of this agent's, or one that
// the sub-agent holds for it (remote != 0, the sub-agent's number).
type agentLock struct {
	l    *hold.Lock
	spec lockspec.Resolved
	done chan struct{} // closed on release: stops the loss watcher
	// remote is the sub-agent's number for a lock it holds, and sub the
	// sub-agent; zero and nil for this agent's own locks.
	remote uint64
	sub    *subAgent
	// lostTold: patrolLocks told the client of this lock's loss (a.mu).
	lostTold bool
}

// updateAnswer is the client's commit (new content) or abort of an update.
type updateAnswer struct {
	id     json.RawMessage // the commit or abort request; nil if the client left
	commit bool
	data   []byte
	old    []byte // the content the client was shown
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
		locks:   map[uint64]*agentLock{},
		pending: map[string]context.CancelCauseFunc{},
		updates: map[uint64]chan updateAnswer{},
		busy:    map[lockspec.Key]time.Time{},
	}
}

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

// readLines calls emit with every complete line of r (without its newline)
// until r ends or emit returns false. A line longer than maxRequestLine is
// passed on as nil, so that it gets an error reply; an unterminated last
// line is dropped: its writer vanished mid-request.
func readLines(r io.Reader, emit func([]byte) bool) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > maxRequestLine {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case err == nil:
			out := line
			if tooLong {
				out = nil
			} else {
				out = out[:len(out)-1]
			}
			if !emit(out) {
				return
			}
			line, tooLong = nil, false
		case errors.Is(err, bufio.ErrBufferFull):
			// part of a long line: keep reading
		default:
			return
		}
	}
}

// handleLine parses one request and runs it.
func (a *agent) handleLine(line []byte) {
	req, bad := parseRequest(line)
	switch {
	case bad != nil:
		a.reply(bad)
	case req != nil:
		a.dispatch(req)
	}
}

// parseRequest parses one request line. It returns the request, or the
// error reply for a line that is not one, or neither for a blank line.
func parseRequest(line []byte) (*agentRequest, *agentReply) {
	if line == nil {
		return nil, failReply(nil, &agentError{Code: codeInvalid, Message: fmt.Sprintf("request line longer than %d bytes", maxRequestLine)})
	}
	if len(trimSpace(line)) == 0 {
		return nil, nil // blank lines are allowed, and ignored
	}
	var req agentRequest
	if err := json.Unmarshal(line, &req); err != nil {
		// Salvage the id, if there is one, so the client can match the error.
		var idOnly struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(line, &idOnly)
		return nil, failReply(validID(idOnly.ID), &agentError{Code: codeInvalid, Message: "malformed request: " + err.Error()})
	}
	if len(req.ID) == 0 || string(req.ID) == "null" {
		return nil, failReply(nil, &agentError{Code: codeInvalid, Message: `request without "id"`})
	}
	if validID(req.ID) == nil {
		return nil, failReply(nil, &agentError{Code: codeInvalid, Message: `"id" must be a string or a number`})
	}
	return &req, nil
}

// validID returns id if it is a JSON string or number, else nil.
func validID(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return nil
	}
	switch c := id[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return id
	}
	return nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// dispatch runs one well-formed request: the ones that may wait in their
// own goroutine, the others at once.
func (a *agent) dispatch(req *agentRequest) {
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
			a.replyError(req.ID, &agentError{Code: codeInvalid, Message: fmt.Sprintf("%s takes a file path, not an address like %q", req.Op, req.Target)})
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
	case "check":
		a.check(req)
	case "cancel":
		a.cancelRequest(req)
	case "commit", "abort":
		a.answerUpdate(req)
	case "":
		a.replyError(req.ID, &agentError{Code: codeInvalid, Message: `request without "op"`})
	default:
		a.replyError(req.ID, &agentError{Code: codeInvalid, Message: fmt.Sprintf("unknown op %q (known: hello, acquire, try, release, check, status, update, commit, abort, append, cancel)", req.Op)})
	}
}

func isNonblocking(req *agentRequest) bool { return req.Wait != nil && *req.Wait == 0 }

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
		a.replyError(id, &agentError{Code: codeInvalid, Message: fmt.Sprintf("id %s is already used by a pending request", key)})
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

func (a *agent) hello(req *agentRequest) {
	if req.Version != 0 && req.Version < agentVersion {
		a.replyError(req.ID, &agentError{Code: "EVERSION", Message: fmt.Sprintf("this agent speaks protocol version %d, the client wants %d", agentVersion, req.Version)})
		return
	}
	r := &agentReply{ID: req.ID, OK: true, Version: agentVersion, Agent: "hold " + version(), PID: os.Getpid()}
	if req.Sync {
		// A client that cannot have the channel (another system, a full
		// disk) is answered without it and keeps to this one.
		r.Sync = a.openSync()
	}
	a.reply(r)
}

// spec is the request's lock options as a lockspec.Spec, the type the
// command line fills from its flags, checked as the flags are: the agent
// accepts exactly what `hold run` accepts.
func (req *agentRequest) spec() (lockspec.Spec, error) {
	s := lockspec.Spec{
		Target:        req.Target,
		Shared:        req.Shared,
		Fair:          req.Fair,
		Protocol:      req.Protocol,
		ProtocolGiven: req.Protocol != "",
		LockFile:      req.LockFile,
		Name:          req.Name,
		ConflictExit:  exitConflict,
	}
	if req.Wait != nil {
		w := *req.Wait
		if w < 0 || w > 1e9 {
			return s, usagef("wait must be a number of seconds >= 0, not %v", w)
		}
		s.Wait, s.WaitGiven = lockspec.SecondsToWait(w), true
	}
	if len(req.Fields) > 0 {
		s.Fields = make([]lockspec.Field, 0, len(req.Fields))
		for _, k := range sortedKeys(req.Fields) {
			if k == "" {
				return s, usagef("a field needs a name")
			}
			// As --field KEY=VALUE does, the first "=" ends the key.
			k, v, _ := strings.Cut(k+"="+req.Fields[k], "=")
			s.Fields = append(s.Fields, lockspec.Field{Key: k, Value: v})
		}
	}
	for _, k := range sortedKeys(req.Settings) {
		if !lockspec.IsSetting(k) {
			return s, usagef("unknown setting %q (known: %s)", k, lockspec.SettingNames())
		}
	}
	if len(req.Settings) > 0 {
		s.Settings = req.Settings
	}
	return s, nil
}

// resolve is spec, resolved: the lock to take, ready for hold.Acquire.
func (req *agentRequest) resolve() (*lockspec.Resolved, error) {
	s, err := req.spec()
	if err != nil {
		return nil, err
	}
	return s.Resolve()
}

// newLock is resolve into a new agentLock, which holds the resolved
// request while the lock is taken and held.
func (req *agentRequest) newLock() (*agentLock, error) {
	s, err := req.spec()
	if err != nil {
		return nil, err
	}
	al := new(agentLock)
	if err := s.ResolveInto(&al.spec); err != nil {
		return nil, err
	}
	return al, nil
}

// acquire serves acquire and try. The first attempt is made at once, on
// the reading goroutine: a free lock is then answered without waking
// another thread, which on a busy machine costs more than the lock
// itself. Only a wait gets its own goroutine.
func (a *agent) acquire(req *agentRequest) {
	al, err := req.newLock()
	if err != nil {
		a.replyErr(req.ID, err)
		return
	}
	spec := &al.spec
	if spec.Nonblock || !a.recentlyBusy(spec) {
		l, err := a.try(spec)
		if err == nil || spec.Nonblock || !errors.Is(err, hold.ErrBusy) {
			a.granted(req.ID, al, l, err)
			return
		}
	}
	a.spawn(req.ID, func(ctx context.Context) {
		l, err := spec.Acquire(ctx, nil)
		a.granted(req.ID, al, l, abortCause(ctx, err))
	})
}

// busyMemory is how long a lock found busy is assumed to stay busy: an
// acquire of it within that time skips the first attempt, which would
// read and judge the holder's record only to be thrown away.
const busyMemory = 100 * time.Millisecond

// maxBusyMemory bounds the busy memory; it is emptied when full.
const maxBusyMemory = 1024

// recentlyBusy reports whether spec's lock was found busy within busyMemory.
func (a *agent) recentlyBusy(spec *lockspec.Resolved) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.busy[spec.Key]
	return ok && time.Since(t) < busyMemory
}

// try makes one attempt at spec's lock, without waiting, and remembers
// when it was busy.
func (a *agent) try(spec *lockspec.Resolved) (*hold.Lock, error) {
	l, err := hold.TryAcquire(spec.Target, spec.Opts...)
	if errors.Is(err, hold.ErrBusy) {
		a.markBusy(spec)
	}
	return l, err
}

func (a *agent) markBusy(spec *lockspec.Resolved) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.busy) >= maxBusyMemory {
		clear(a.busy)
	}
	a.busy[spec.Key] = time.Now()
}

// granted answers an acquisition: the lock l, or the error that kept it.
func (a *agent) granted(id json.RawMessage, al *agentLock, l *hold.Lock, err error) {
	r, watch := a.grant(id, al, l, err)
	if r != nil {
		a.reply(r)
	}
	if watch != nil {
		watch()
	}
}

// grant files the lock l under a new number and returns the reply that
// says so, or the error reply when err is set. watch, when not nil, is to
// be called once the reply is sent: it starts watching the lock for its
// loss, so that the client never hears of a loss before the lock itself.
// The reply is nil when the client left meanwhile (l is then released).
func (a *agent) grant(id json.RawMessage, al *agentLock, l *hold.Lock, err error) (r *agentReply, watch func()) {
	if err != nil {
		al.spec.Close()
		return errReply(id, err), nil
	}
	al.l, al.done = l, make(chan struct{})
	n, ok := a.addLock(al)
	if !ok { // the client left while we waited
		l.Release()
		al.spec.Close()
		return nil, nil
	}
	return lockReply(id, n, l), func() { a.watchLoss(n, al) }
}

// abortCause makes a wait ended by a cancel request or by the client's
// departure say so.
func abortCause(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.DeadlineExceeded) && errors.Is(err, context.Canceled) {
		return fmt.Errorf("%w (%v)", err, cause)
	}
	return err
}

func lockReply(id json.RawMessage, n uint64, l *hold.Lock) *agentReply {
	owner := l.Owner()
	return &agentReply{ID: id, OK: true, Lock: n, Token: l.Token(), Path: l.Path(), Protocol: l.Protocol(), Owner: &owner}
}

// addLock files a lock under a new number; false if the agent is closing.
func (a *agent) addLock(al *agentLock) (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return 0, false
	}
	a.next++
	a.locks[a.next] = al
	if !a.patrol && isKernel(al) {
		a.patrol = true
		a.wg.Add(1)
		go a.patrolLocks()
	}
	return a.next, true
}

// patrolEvery is how often the agent looks at the files of its kernel
// locks.
const patrolEvery = time.Second

// isKernel reports whether al is a kernel lock of this agent's own.
func isKernel(al *agentLock) bool { return al.remote == 0 && al.l.Protocol() == "flock" }

// patrolLocks finds the kernel locks whose lock file was removed or
// replaced, and tells the client unasked, within patrolEvery. A kernel
// lock cannot be taken away: it is lost only when its path stops naming
// the locked file, and nothing but a look at the path shows that. (The
// other protocols watch themselves, with a heartbeat or a lease, and
// watchLoss reports them.) It runs while the agent holds a kernel lock:
// one stat per lock and round.
func (a *agent) patrolLocks() {
	defer a.wg.Done()
	t := time.NewTicker(patrolEvery)
	defer t.Stop()
	type held struct {
		n  uint64
		al *agentLock
	}
	var kernel []held
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-t.C:
		}
		kernel = kernel[:0]
		a.mu.Lock()
		for n, al := range a.locks {
			if isKernel(al) && !al.lostTold {
				kernel = append(kernel, held{n, al})
			}
		}
		if len(kernel) == 0 {
			a.patrol = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		for _, k := range kernel {
			err := k.al.l.Check()
			if !errors.Is(err, hold.ErrLost) {
				continue // held, or released meanwhile
			}
			a.mu.Lock()
			tell := a.locks[k.n] == k.al
			k.al.lostTold = true
			a.mu.Unlock()
			if tell {
				a.reply(&agentReply{Event: "lost", Lock: k.n, Path: k.al.l.Path(), Error: errorReply(err)})
			}
		}
	}
}

// watchLoss tells the client, unasked, when lock n is found lost. Kernel
// locks are left to patrolLocks: their loss is found only by looking, and
// a goroutine per lock would cost every acquisition a thread wake-up.
func (a *agent) watchLoss(n uint64, al *agentLock) {
	if isKernel(al) {
		return
	}
	lost := al.l.Lost()
	if lost == nil {
		return
	}
	a.mu.Lock()
	closed := a.closed
	if !closed {
		a.wg.Add(1)
	}
	a.mu.Unlock()
	if closed {
		return // shutdown releases the lock
	}
	go func() {
		defer a.wg.Done()
		select {
		case <-lost:
			a.reply(&agentReply{Event: "lost", Lock: n, Path: al.l.Path(),
				Error: errorReply(al.l.Check())})
		case <-al.done:
		case <-a.ctx.Done():
		}
	}()
}

// takeLock removes lock n from the table for its release.
func (a *agent) takeLock(n uint64) *agentLock {
	a.mu.Lock()
	defer a.mu.Unlock()
	al := a.locks[n]
	delete(a.locks, n)
	return al
}

func (a *agent) lookupLock(n uint64) *agentLock {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.locks[n]
}

func noLock(n uint64) *agentError {
	return &agentError{Code: codeNoLock, Message: fmt.Sprintf("no lock %d: never acquired, or already released", n)}
}

func (a *agent) release(req *agentRequest) {
	al := a.takeLock(req.Lock)
	if al == nil {
		a.replyError(req.ID, noLock(req.Lock))
		return
	}
	if al.remote != 0 {
		a.forwardRelease(req, al)
		return
	}
	a.replyErr(req.ID, al.release())
}

// release gives up one of the agent's own locks, already taken out of
// the table.
func (al *agentLock) release() error {
	close(al.done)
	err := al.l.Release()
	al.spec.Close()
	return err
}

func (a *agent) check(req *agentRequest) {
	al := a.lookupLock(req.Lock)
	switch {
	case al == nil:
		a.replyError(req.ID, noLock(req.Lock))
	case al.remote != 0:
		a.forwardLockOp(req, al)
	default:
		a.replyErr(req.ID, al.l.Check())
	}
}

func (a *agent) status(req *agentRequest) {
	spec, err := req.resolve()
	if err != nil {
		a.replyErr(req.ID, err)
		return
	}
	defer spec.Close()
	st, err := spec.Inspect()
	if err != nil {
		a.replyErr(req.ID, err)
		return
	}
	a.reply(&agentReply{ID: req.ID, OK: true, Status: newStatusReport(req.Target, st)})
}

func (a *agent) cancelRequest(req *agentRequest) {
	if validID(req.Request) == nil {
		a.replyError(req.ID, &agentError{Code: codeInvalid, Message: `cancel needs "request": the id of the request to cancel`})
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
	a.reply(&agentReply{ID: req.ID, OK: true, Cancelled: ok})
}

// append serves append: the library's guarded append, as `hold append`
// does it.
func (a *agent) append(ctx context.Context, req *agentRequest) {
	a.replyErr(req.ID, a.guarded(ctx, req, func(l *hold.Lock) error {
		return atomicfile.AppendTo(atomicfile.OS{}, req.Target, req.MustExist, req.Data, l.Check)
	}))
}

// update serves update. Under the lock it replies with the file's content
// and an update number, then waits for the client's commit (the new
// content) or abort; the commit is answered once the file is replaced (or
// not: unchanged content writes nothing). Nothing is written on abort, or
// if the client leaves first.
func (a *agent) update(ctx context.Context, req *agentRequest) {
	var answer *updateAnswer
	err := a.guarded(ctx, req, func(l *hold.Lock) error {
		return atomicfile.Update(atomicfile.OS{}, req.Target, req.MustExist, func(old []byte) ([]byte, error) {
			answer = a.askForContent(req, l, old)
			if !answer.commit {
				return nil, errUpdateAborted
			}
			return answer.data, nil
		}, l.Check)
	})
	switch {
	case answer == nil: // failed before the client saw the content
		a.replyErr(req.ID, err)
	case answer.id == nil: // the client left
	case errors.Is(err, errUpdateAborted):
		a.reply(&agentReply{ID: answer.id, OK: true})
	case err != nil:
		a.replyErr(answer.id, err)
	default:
		a.reply(&agentReply{ID: answer.id, OK: true, Written: !bytes.Equal(answer.old, answer.data)})
	}
}

// errUpdateAborted ends an update the client aborted (or left).
var errUpdateAborted = errors.New("update aborted by the client")

func (a *agent) askForContent(req *agentRequest, l *hold.Lock, old []byte) *updateAnswer {
	ch := make(chan updateAnswer, 1)
	a.mu.Lock()
	a.next++
	n := a.next
	a.updates[n] = ch
	a.mu.Unlock()
	r := lockReply(req.ID, 0, l)
	r.Update, r.Data = n, old
	a.reply(r)
	select {
	case ans := <-ch:
		ans.old = old
		return &ans
	case <-a.ctx.Done():
		a.mu.Lock()
		delete(a.updates, n)
		a.mu.Unlock()
		return &updateAnswer{}
	}
}

// answerUpdate passes a commit or abort on to the update waiting for it.
func (a *agent) answerUpdate(req *agentRequest) {
	if req.Op == "commit" && req.Data == nil {
		a.replyError(req.ID, &agentError{Code: codeInvalid, Message: `commit needs "data", the new content in base64 ("" empties the file)`})
		return
	}
	a.mu.Lock()
	ch, ok := a.updates[req.Update]
	delete(a.updates, req.Update)
	a.mu.Unlock()
	if !ok {
		a.replyError(req.ID, &agentError{Code: codeNoLock, Message: fmt.Sprintf("no update %d is waiting for its content", req.Update)})
		return
	}
	ch <- updateAnswer{id: req.ID, commit: req.Op == "commit", data: req.Data}
}

// guarded takes the exclusive lock of the file req names, as the request
// says, runs work under it and releases it: what `hold update` and `hold
// append` do, with errors labelled the same way.
func (a *agent) guarded(ctx context.Context, req *agentRequest, work func(*hold.Lock) error) error {
	if req.Target == "" {
		return usagef("%s needs the file's path in \"target\"", req.Op)
	}
	if req.Shared {
		return usagef("%s needs an exclusive lock; \"shared\" does not apply", req.Op)
	}
	if err := checkGuarded(req.Op, req.Target, req.LockFile); err != nil {
		return err
	}
	spec, err := req.resolve()
	if err != nil {
		return err
	}
	defer spec.Close()
	l, err := spec.Acquire(ctx, nil)
	if err != nil {
		return abortCause(ctx, err)
	}
	err = work(l)
	if rerr := l.Release(); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil && !errors.Is(err, errUpdateAborted) {
		return fileError(req.Op, req.Target, err)
	}
	return err
}

// shutdown ends every wait and pending update, releases every lock and
// waits for the request goroutines: the client is gone.
func (a *agent) shutdown() {
	a.mu.Lock()
	a.closed = true
	locks := a.locks
	a.locks = map[uint64]*agentLock{}
	sub := a.remote
	a.mu.Unlock()
	a.cancel(errClientGone)
	for _, al := range locks {
		if al.remote == 0 {
			al.release()
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

// reply writes one reply or event line. A failed write means the client
// is gone.
func (a *agent) reply(r *agentReply) {
	b := encodeReply(r)
	a.outMu.Lock()
	a.out.Write(b)
	err := a.out.Flush()
	a.outMu.Unlock()
	if err != nil {
		a.goneOnce.Do(func() { close(a.gone) })
	}
}

// encodeReply encodes r as one line, newline included.
func encodeReply(r *agentReply) []byte {
	b, err := json.Marshal(r)
	if err != nil {
		// Only an unencodable error message could cause this.
		b, _ = json.Marshal(&agentReply{ID: r.ID, Error: &agentError{Code: codeIO, Message: "reply not encodable: " + err.Error()}})
	}
	return append(b, '\n')
}

// replyErr replies ok when err is nil, else with err described.
func (a *agent) replyErr(id json.RawMessage, err error) {
	a.reply(errReply(id, err))
}

func (a *agent) replyError(id json.RawMessage, e *agentError) {
	a.reply(failReply(id, e))
}

// errReply is the reply ok when err is nil, else the one describing err.
func errReply(id json.RawMessage, err error) *agentReply {
	if err == nil {
		return &agentReply{ID: id, OK: true}
	}
	return failReply(id, errorReply(err))
}

// failReply is the reply carrying e; a request without a usable id is
// answered with id null.
func failReply(id json.RawMessage, e *agentError) *agentReply {
	if id == nil {
		id = json.RawMessage("null")
	}
	return &agentReply{ID: id, Error: e}
}

// errorReply describes err for the client: its code, its message (which
// names the holder), the holder and the hint.
func errorReply(err error) *agentError {
	e := &agentError{Code: errorCode(err), Message: err.Error()}
	var he *hold.Error
	if errors.As(err, &he) {
		e.Hint = he.Hint
		if he.Holder != nil {
			e.Holder = newHolderReport(he.Holder, true)
		}
	}
	return e
}

// errorCodes maps the kinds of an error to a reply's code: the first row
// whose kinds the error has decides; codeIO if none does. It is the
// agent's counterpart of exitCodes.
var errorCodes = []struct {
	kinds errkind.Kinds
	code  string
}{
	{errkind.Usage, codeInvalid},
	{errkind.Foreign, codeForeign},
	{errkind.Busy, codeBusy},
	{errkind.Timeout, codeTimeout},
	{errkind.Lost, codeLost},
	{errkind.Canceled, codeAbort},
	{errkind.Exec, codeNoExec},
	{errkind.ReadOnly, codeReadOnly},
	{errkind.Full, codeFull},
	{errkind.NotRegular, codeNotRegular},
	{errkind.IsDir, codeIsDir},
	{errkind.NotExist, codeNotFound},
	{errkind.Permission, codeAccess},
	{errkind.Unsupported, codeUnsupported},
}

// errorCode is the code of a reply that fails with err.
func errorCode(err error) string {
	kinds := errkind.Of(err)
	for _, row := range errorCodes {
		if kinds&row.kinds != 0 {
			return row.code
		}
	}
	return codeIO
}
