package agent

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// In-process locks (internal/flock/inproc.go). A client that asks for it
// ("inproc") is handed, with a lazy kernel lock taken here, a recipe to
// take the same lock in its own process next time, where the lock is free
// and the file unchanged; any other case comes here as before. The
// client's in-process holds reach the agent as their lock files'
// identities (heldFile): to write and erase their records on the holder's
// behalf, to check them for loss, and to fail at once a wait of the
// holder's for one of them (held_inproc), which it could never release.

// heldFile names a lock file a client holds in its own process.
type heldFile struct {
	Path string `json:"path"`
	flock.File
}

// recipe returns the recipe for l, the lock just taken for al's request,
// or nil when it is not one a client may take itself: a plain exclusive
// kernel lock of this machine on one lock file (not fair, not a
// semaphore's slot, nor a lock that keeps a second file), whose lock file
// the library judged (flock.RecipeFor).
func recipe(al *heldLock, l *hold.Lock) *flock.Recipe {
	k := &al.spec.Key
	if !al.inproc || !al.lazy || k.Shared || k.Fair || k.Slots > 1 || l.Protocol() != "flock" ||
		lockspec.AddressScheme(al.spec.Target) != "" || len(l.Files()) != 1 {
		return nil
	}
	c := client()
	if c == nil {
		return nil
	}
	r, ok := flock.RecipeFor(l.File(), c)
	if !ok {
		return nil
	}
	return r
}

// heldInProcess returns the deadlock error for an acquisition that found
// its lock busy (busy, the ErrBusy error, names the holder) when the lock
// is one the caller holds in its own process (req.HeldInProc); nil
// otherwise.
func heldInProcess(req *request, busy error) error {
	var be *lock.Error
	if len(req.HeldInProc) == 0 || !errors.As(busy, &be) || !errors.Is(busy, hold.ErrBusy) {
		return nil
	}
	files := make([]flock.File, len(req.HeldInProc))
	for i, f := range req.HeldInProc {
		files[i] = f.File
	}
	if !flock.HeldIn(be.Path, files) {
		return nil
	}
	return &lock.Error{Op: "acquire", Path: be.Path, Err: lock.ErrDeadlock, Holder: be.Holder,
		Hint: fmt.Sprintf("the holder is the caller itself (pid %d, a lock it holds and will not release while it waits): release it first, or take it once and pass it on", clientPID())}
}

// tryHeldInProcess tries spec's lock first when req names the client's
// in-process holds, so that a wait for one of them fails at once
// (heldInProcess): the lock when the try took it, the error when it
// failed otherwise than busy, neither when the caller is to wait.
func tryHeldInProcess(req *request, spec *lockspec.Resolved) (*hold.Lock, error) {
	if len(req.HeldInProc) == 0 {
		return nil, nil
	}
	l, err := hold.TryAcquire(spec.Target, spec.Opts...)
	if derr := heldInProcess(req, err); derr != nil {
		return nil, derr
	}
	if errors.Is(err, hold.ErrBusy) {
		return nil, nil
	}
	return l, err
}

// inproc serves inproc_record, inproc_erase and inproc_check: a client's
// in-process hold, written, erased or checked as the library's own.
func (a *agent) inproc(req *request) *reply {
	f := req.heldFile
	if f.Path == "" || f.Ino == 0 {
		return failed(req.ID, &replyError{Code: codeInvalid, Message: req.Op + ` needs "path", "dev" and "ino": the lock file the client holds`})
	}
	switch req.Op {
	case "inproc_record":
		w, err := flock.WriteRecord(f.Path, f.File, req.Ticket, time.Unix(0, req.Started))
		if err != nil {
			return replyTo(req.ID, err)
		}
		return &reply{ID: req.ID, OK: true, Token: w.Owner.Fence, Data: w.Record, Owner: &w.Owner}
	case "inproc_erase":
		return replyTo(req.ID, flock.EraseRecord(f.Path, f.File, req.Fence, req.Data))
	default:
		return replyTo(req.ID, flock.CheckHeld(f.Path, f.File))
	}
}

// client describes the agent's client for the records of its in-process
// holds (proc.Parent), read once; nil when it cannot be read.
var client = sync.OnceValue(func() *lock.Owner {
	o, ok := proc.Parent()
	if !ok || o.PID != clientPID() {
		return nil
	}
	return &o
})
