package agent

import (
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
// behalf, to check them for loss, and, for a request of the thread that
// holds them (held_inproc), to tell the library's deadlock checks that
// the client keeps them while it waits (proc.WithCallerKeeps): a wait
// for one of them fails at once, and a cycle through one is found.

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

// callerKeeps are the lock files the request says its caller holds in
// its own process (held_inproc), for lockspec.Spec.CallerKeeps.
func (req *request) callerKeeps() []proc.HeldFile {
	if len(req.HeldInProc) == 0 {
		return nil
	}
	files := make([]proc.HeldFile, len(req.HeldInProc))
	for i, f := range req.HeldInProc {
		files[i] = proc.HeldFile{Path: f.Path, FileKey: proc.FileKey{Dev: f.Dev, Ino: f.Ino}}
	}
	return files
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
