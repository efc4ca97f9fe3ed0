package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/report"
)

// The wire protocol: the request and reply lines, how they are read and
// written, and the error codes replies carry (docs/agent.md).

// protocolVersion is the highest protocol version this agent speaks
// (docs/agent.md). Version 4 added hello's "pipeline" (request.Pipeline)
// and the lock reply's "release_ahead". Version 2 added the synchronous channel's queued
// replies (request.Queue) and the reply poll budget in the channel's
// first reply (reply.SpinMicros); version 3 the lazy acquisition
// (request.Lazy), whose reply leaves out the token and the owner record
// until a "token" request asks for them. An older client sends none of
// these fields and reads none, so this agent still serves it, down to
// minProtocolVersion.
const protocolVersion = 4

// minProtocolVersion is the oldest protocol version this agent serves.
const minProtocolVersion = 1

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
	codeDeadlock    = "EDEADLK"
)

// request is one request line. Which fields apply depends on Op;
// docs/agent.md lists them per operation.
type request struct {
	ID json.RawMessage `json:"id"`
	Op string          `json:"op"`

	// hello: the highest version the client speaks, and whether it
	// wants the synchronous channel (sync.go).
	Version int  `json:"version"`
	Sync    bool `json:"sync"`
	// hello: the directory, made by the client and private to its user,
	// in which to make the synchronous channel's FIFOs; empty: one of the
	// agent's own. A client that knows where they will be can open them
	// without waiting for the hello's reply.
	SyncDir string `json:"sync_dir"`
	// hello: the client writes its releases on the synchronous channel
	// without waiting for their replies, which it reads with its next
	// request's (version 4). Its cycle then has one round trip
	// (syncChannel.pipelined).
	Pipeline bool `json:"pipeline"`

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
	// HeldBy: the numbers of the locks the caller holds and will not
	// release while this request waits (a thread's own): a wait for a
	// lock one of them holds fails at once as a deadlock.
	HeldBy []uint64 `json:"held_by"`
	// MakeDirs: make the lock file's missing directories; Mode: the
	// permission bits of a lock file created (hold.MakeDirs,
	// hold.LockFileMode).
	MakeDirs bool `json:"make_dirs"`
	Mode     *int `json:"mode"`
	// SoftFile: hold a portable lock as filelock's SoftFileLock does, a
	// plain file naming the agent (hold.SoftFile).
	SoftFile bool `json:"soft_file"`
	// Stale: the lock's own stale time in seconds, for the portable
	// protocol (hold.StaleAfter); for status, the stale time to judge by.
	Stale *float64 `json:"stale"`
	// Heartbeat: how often, in seconds, the holder of a portable lock
	// refreshes it (hold.Heartbeat), as proper-lockfile's update.
	Heartbeat *float64 `json:"heartbeat"`
	// LostIfTouched: a portable lock whose time stamp someone else
	// changes is lost (hold.LostIfTouched), as proper-lockfile's holders
	// judge.
	LostIfTouched bool `json:"lost_if_touched"`
	// Lazy, on acquire and try: the reply leaves out the token and the
	// owner record, which the client asks for with a "token" request when
	// it needs them. A kernel lock then writes its record only when asked
	// or once held for a while, as the library does for its own callers,
	// and a short hold costs no write at all. Version 3.
	Lazy bool `json:"lazy"`
	// Slots: take one of this many slots of a counting semaphore
	// (hold.Slots, `hold run --slots`).
	Slots *int `json:"slots"`
	// DeadlockAfter: seconds a wait lasts before it looks for a deadlock
	// between processes, 0 for never (hold.DeadlockAfter); absent: 1.
	DeadlockAfter *float64 `json:"deadlock_after"`

	// update, append
	MustExist bool `json:"must_exist"`
	// update: accept what a replacement cannot keep, as `hold update
	// --allow-split` and `--allow-owner-change` do. An append writes in
	// place, keeping both, so it ignores them, as the Go API's Append does.
	AllowSplit       bool `json:"allow_split"`
	AllowOwnerChange bool `json:"allow_owner_change"`
	// update: accept an empty commit, which empties the file, as `hold
	// update --allow-empty` does; without it the commit is refused and
	// nothing is written (the library's rule, hold.AllowEmpty).
	AllowEmpty bool `json:"allow_empty"`
	// append: the bytes to append; commit: the new content (base64).
	Data []byte `json:"data"`

	// InProc, on a lazy acquire or try: the client may take this lock
	// in its own process next time; the reply carries the recipe when
	// the library says it may (inproc.go). HeldInProc: the locks the
	// caller holds in its own process and will not release while this
	// request waits, as HeldBy names the agent's.
	InProc     bool       `json:"inproc"`
	HeldInProc []heldFile `json:"held_inproc"`
	// inproc_record, inproc_erase, inproc_check: the client's in-process
	// hold (its lock file and identity), its recipe's ticket and when it
	// began (ns since the epoch); for an erase, the record's token and
	// bytes (Data).
	heldFile
	Ticket  []byte `json:"ticket"`
	Started int64  `json:"started_ns"`
	Fence   uint64 `json:"record_token"`

	// release, check, token: the lock's number.
	Lock uint64 `json:"lock"`
	// release written ahead (version 4): when the client let go of the
	// lock, in nanoseconds of the system's monotonic clock
	// (CLOCK_MONOTONIC). A loss the agent heard of only after that moment
	// came after the client's hold ended and is not the release's failure
	// (see releasedBefore).
	Sent int64 `json:"sent"`
	// commit, abort: the update's number.
	Update uint64 `json:"update"`
	// cancel: the id of the request whose wait to end.
	Request json.RawMessage `json:"request"`

	// Queue, on the synchronous channel: the client must not block
	// there. A request the agent cannot answer at once (a wait, a network
	// target, a file to read or write) is then served as the standard
	// channel serves it, its reply sent on stdout under the request's id,
	// and the synchronous channel answers at once with Queued (see
	// syncDispatch). Version 2.
	Queue bool `json:"queue"`

	// syncCaller: the request came on the synchronous channel, whose
	// client is blocked until the reply: it cannot release a lock while
	// the request waits (see routed).
	syncCaller bool
}

// reply is a reply (ID set) or an event (Event set).
type reply struct {
	ID    json.RawMessage `json:"id,omitempty"`
	Event string          `json:"event,omitempty"`
	OK    bool            `json:"ok"`

	// hello
	Version int        `json:"version,omitempty"`
	Agent   string     `json:"agent,omitempty"`
	PID     int        `json:"pid,omitempty"`
	Sync    *syncPaths `json:"sync,omitempty"`

	// SpinMicros, in the synchronous channel's first reply: how long the
	// client should poll the replies FIFO for a reply before it blocks
	// in a read, in µs (replySpin). Version 2. Before the lock's fields:
	// a lock's reply ends with its owner record, which the Python client
	// finds by that.
	SpinMicros *int `json:"spin_us,omitempty"`

	// acquire, try, update (the lock taken); lost (the lock lost).
	Lock     uint64 `json:"lock,omitempty"`
	Token    uint64 `json:"token,omitempty"`
	Path     string `json:"path,omitempty"`
	Protocol string `json:"protocol,omitempty"`
	// Slot is the slot held of a semaphore (Lock.Slot); absent means 0.
	Slot int `json:"slot,omitempty"`
	// ReleaseAhead (acquire, try; version 4): the client may write this
	// lock's release without waiting for its reply (hello's "pipeline").
	// Only a kernel lock's: its release leaves nothing on disk that a
	// program could look for the moment release returns, as a portable
	// lock's directory is, and it is answered at once, as a network
	// lock's is not.
	ReleaseAhead bool `json:"release_ahead,omitempty"`
	// Recipe (acquire, try with "inproc"): how the client may take this
	// lock in its own process next time (inproc.go).
	Recipe *flock.Recipe `json:"recipe,omitempty"`
	Owner  *hold.Owner   `json:"owner,omitempty"`

	// update: the update's number and the file's old content.
	Update uint64 `json:"update,omitempty"`
	Data   []byte `json:"data,omitempty"`
	// commit: whether the file was written (false: the content was unchanged),
	// and what a client should be told about an update that succeeded
	// (the warnings `hold update` prints on stderr).
	Written bool   `json:"written,omitempty"`
	Warning string `json:"warning,omitempty"`

	// status
	Status *report.Status `json:"status,omitempty"`

	// cancel: whether a pending request was found and cancelled.
	Cancelled bool `json:"cancelled,omitempty"`

	// Queued, on the synchronous channel, answers a request sent with
	// "queue": its reply comes on stdout, under the same id.
	Queued bool `json:"queued,omitempty"`

	Error *replyError `json:"error,omitempty"`
}

// replyError describes a failed request or a lost lock.
type replyError struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Holder  *report.Holder `json:"holder,omitempty"`
	Hint    string         `json:"hint,omitempty"`
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

// parseRequest parses one request line. It returns the request, or the
// error reply for a line that is not one, or neither for a blank line.
func parseRequest(line []byte) (*request, *reply) {
	if line == nil {
		return nil, failed(nil, &replyError{Code: codeInvalid, Message: fmt.Sprintf("request line longer than %d bytes", maxRequestLine)})
	}
	if len(trimSpace(line)) == 0 {
		return nil, nil // blank lines are allowed, and ignored
	}
	if req, ok := parseCommon(line); ok {
		return req, nil // a line of a lock's cycle (wirefast.go)
	}
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		// Salvage the id, if there is one, so the client can match the error.
		var idOnly struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(line, &idOnly)
		return nil, failed(validID(idOnly.ID), &replyError{Code: codeInvalid, Message: "malformed request: " + err.Error()})
	}
	if len(req.ID) == 0 || string(req.ID) == "null" {
		return nil, failed(nil, &replyError{Code: codeInvalid, Message: `request without "id"`})
	}
	if validID(req.ID) == nil {
		return nil, failed(nil, &replyError{Code: codeInvalid, Message: `"id" must be a string or a number`})
	}
	if _, rest, ok := splitID(line); ok {
		recent.remember(rest, &req)
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

// encodeReply encodes r as one line, newline included.
func encodeReply(r *reply) []byte {
	if b, ok := appendCommon(make([]byte, 0, 128), r); ok {
		return append(b, '\n') // a reply of a lock's cycle (wirefast.go)
	}
	b, err := json.Marshal(r)
	if err != nil {
		// Only an unencodable error message could cause this.
		b, _ = json.Marshal(&reply{ID: r.ID, Error: &replyError{Code: codeIO, Message: "reply not encodable: " + err.Error()}})
	}
	return append(b, '\n')
}

// The reply helpers. Each has one job:
//
//	answer(id, err)  send replyTo(id, err)
//	refuse(id, e)    send failed(id, e)
//	replyTo(id, err) the reply: ok when err is nil, else errorOf(err)
//	failed(id, e)    the reply carrying the error e
//	errorOf(err)     the error object describing err

// answer replies ok when err is nil, else with err described.
func (a *agent) answer(id json.RawMessage, err error) {
	a.send(replyTo(id, err))
}

// refuse replies with the error e.
func (a *agent) refuse(id json.RawMessage, e *replyError) {
	a.send(failed(id, e))
}

// replyTo is the reply ok when err is nil, else the one describing err.
func replyTo(id json.RawMessage, err error) *reply {
	if err == nil {
		return &reply{ID: id, OK: true}
	}
	return failed(id, errorOf(err))
}

// failed is the reply carrying e; a request without a usable id is
// answered with id null.
func failed(id json.RawMessage, e *replyError) *reply {
	if id == nil {
		id = json.RawMessage("null")
	}
	return &reply{ID: id, Error: e}
}

// errorOf describes err for the client: its code, its message (which
// names the holder), the holder and the hint.
func errorOf(err error) *replyError {
	e := &replyError{Code: errorCode(err), Message: err.Error()}
	var he *hold.Error
	if errors.As(err, &he) {
		e.Hint = he.Hint
		if he.Holder != nil {
			e.Holder = report.NewErrorHolder(he.Holder)
		}
	}
	return e
}

// errorCodes maps the kinds of an error to a reply's code: the first row
// whose kinds the error has decides; codeIO if none does. It is the
// agent's counterpart of the command line's exit statuses.
var errorCodes = []struct {
	kinds errkind.Kinds
	code  string
}{
	{errkind.Usage, codeInvalid},
	{errkind.Deadlock, codeDeadlock},
	{errkind.Foreign, codeForeign},
	{errkind.Busy, codeBusy},
	{errkind.Timeout | errkind.GaveUp, codeTimeout},
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
