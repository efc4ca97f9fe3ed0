package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/atomicfile"
	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/guard"
	"github.com/hold-dev/hold/internal/lockspec"
)

// update and append: the library's guarded file changes, with the new
// content of an update handed over by the client.

// updateAnswer is the client's commit (new content) or abort of an update.
type updateAnswer struct {
	id     json.RawMessage // the commit or abort request; nil if the client left
	commit bool
	data   []byte
	old    []byte // the content the client was shown
}

// append serves append: the library's guarded append, as `hold append`
// does it.
func (a *agent) append(ctx context.Context, req *request) {
	a.answer(req.ID, a.guarded(ctx, req, func(l *hold.Lock) error {
		return atomicfile.AppendTo(atomicfile.OS{}, req.Target, req.MustExist, req.Data, l.Check)
	}))
}

// update serves update. Under the lock it replies with the file's content
// and an update number, then waits for the client's commit (the new
// content) or abort; the commit is answered once the file is replaced (or
// not: unchanged content writes nothing). Nothing is written on abort, or
// if the client leaves first.
func (a *agent) update(ctx context.Context, req *request) {
	var answer *updateAnswer
	// The warnings come after the rename, when the update has succeeded:
	// they go with the commit's ok reply, since the agent's stderr is
	// nobody's to read.
	var warnings []string
	o := atomicfile.Options{
		MustExist:        req.MustExist,
		AllowSplit:       req.AllowSplit,
		AllowOwnerChange: req.AllowOwnerChange,
		AllowEmpty:       req.AllowEmpty,
		Warn:             func(err error) { warnings = append(warnings, err.Error()) },
	}
	err := a.guarded(ctx, req, func(l *hold.Lock) error {
		return atomicfile.UpdateWith(atomicfile.OS{}, req.Target, o, func(old []byte) ([]byte, error) {
			answer = a.askForContent(req, l, old)
			if !answer.commit {
				return nil, errUpdateAborted
			}
			return answer.data, nil
		}, l.Check)
	})
	switch {
	case answer == nil: // failed before the client saw the content
		a.answer(req.ID, err)
	case answer.id == nil: // the client left
	case errors.Is(err, errUpdateAborted):
		a.send(&reply{ID: answer.id, OK: true})
	case err != nil:
		a.answer(answer.id, err)
	default:
		a.send(&reply{ID: answer.id, OK: true, Written: !bytes.Equal(answer.old, answer.data), Warning: strings.Join(warnings, "; ")})
	}
}

// errUpdateAborted ends an update the client aborted (or left).
var errUpdateAborted = errors.New("update aborted by the client")

func (a *agent) askForContent(req *request, l *hold.Lock, old []byte) *updateAnswer {
	ch := make(chan updateAnswer, 1)
	a.mu.Lock()
	a.next++
	n := a.next
	a.updates[n] = ch
	a.mu.Unlock()
	r := lockReply(req.ID, 0, l)
	r.Update, r.Data = n, old
	a.send(r)
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
func (a *agent) answerUpdate(req *request) {
	if req.Op == "commit" && req.Data == nil {
		a.refuse(req.ID, &replyError{Code: codeInvalid, Message: `commit needs "data", the new content in base64 ("" empties the file if the update has allow_empty)`})
		return
	}
	a.mu.Lock()
	ch, ok := a.updates[req.Update]
	delete(a.updates, req.Update)
	a.mu.Unlock()
	if !ok {
		a.refuse(req.ID, &replyError{Code: codeNoLock, Message: fmt.Sprintf("no update %d is waiting for its content", req.Update)})
		return
	}
	ch <- updateAnswer{id: req.ID, commit: req.Op == "commit", data: req.Data}
}

// guarded takes the exclusive lock of the file req names, as the request
// says, runs work under it and releases it: what `hold update` and `hold
// append` do, with errors labelled the same way.
func (a *agent) guarded(ctx context.Context, req *request, work func(*hold.Lock) error) error {
	if req.Target == "" {
		return errkind.Usagef("%s needs the file's path in \"target\"", req.Op)
	}
	// Either would let another holder in beside this one, and then two
	// updates read the same old content and one change is lost (issue
	// 53): refused as hold update and hold append refuse -s and --slots.
	// "slots": 1 is the plain lock, which a client may send for every
	// request.
	if req.Shared {
		return errkind.Usagef("%s needs the file's lock alone, and \"shared\" lets other holders in beside it, so that one change would be lost: leave it out (%s takes the lock exclusively)", req.Op, req.Op)
	}
	if req.Slots != nil && *req.Slots != 1 {
		return errkind.Usagef("%s needs the file's lock alone, and \"slots\" (%d) lets other holders in beside it, so that one change would be lost: leave it out (%s takes the whole lock)", req.Op, *req.Slots, req.Op)
	}
	if err := guard.Refusal(req.Op, req.Target, req.LockFile); err != nil {
		return err
	}
	spec, err := req.resolve()
	if err != nil {
		return err
	}
	defer spec.Close()
	// The file is rewritten: a file named "*.lock", locked itself too,
	// must still be the file when the change is published
	// (hold.ForRewrite).
	spec.Opts = append(spec.Opts, hold.ForRewrite())
	a.failIfHeldBy(req, spec)
	l, err := spec.Acquire(ctx, nil)
	if err != nil {
		return abortCause(ctx, err)
	}
	err = work(l)
	if rerr := l.Release(); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil && !errors.Is(err, errUpdateAborted) {
		return lockspec.FileError(req.Op, req.Target, err)
	}
	return err
}
