package hold

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hold-dev/hold/internal/deadlock"
	"github.com/hold-dev/hold/internal/fairq"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// Lock is a held lock. Release it when done; Release is idempotent and safe
// to defer. A Lock is safe for concurrent use. It is opaque: what it holds
// is read through its methods (Path, Owner, Token, Lost, ...).
type Lock struct {
	h      Handle
	target string
	path   string
	proto  string

	// held is this Lock's entry in the table of the locks this process
	// holds (see FailIfHeldHere), from the grant to its Release.
	held deadlock.Held

	// kept is the context Do runs fn under, which names this lock to
	// the waits fn makes (see internal/deadlock's cycle.go).
	kept deadlock.Kept
}

// Acquire blocks until this process holds the lock on target, or ctx ends.
//
// The lock path is "<target>.lock", unless LockFile or Named says
// otherwise (target then only labels the lock and may be empty). A target
// whose last element ends in ".lock" is a lock file by its name: flock(1),
// gofrs/flock and Python's filelock lock it as it is, and package managers
// keep their data in it (yarn.lock, Cargo.lock) and save it by renaming a
// new file over it. Acquire(ctx, "app.lock") locks its companion
// app.lock.lock, which holds the record and the token, and then app.lock
// itself, with a kernel lock that writes nothing into it: so it excludes
// flock.New("app.lock") and Acquire(ctx, "app") (lock path app.lock), and
// the holder may replace app.lock without losing its lock (see the
// package internal/lockpath for the rule). Where the companion cannot be
// made (a directory this process may not write), an existing app.lock is
// locked alone, as flock(1) locks it. A directory whose name ends in
// ".lock" is locked through its companion only. A directory is
// locked beside itself however it is spelled: "data", "data/" and "." in
// data all give "data.lock" (trailing separators are dropped, and a target
// ending in "." or ".." is made absolute); the root directory is refused
// with ErrInvalidName.
//
// Waiting sleeps in the kernel for kernel locks; when ctx ends, Acquire
// returns at once with an *Error that matches ErrTimeout (deadline) or
// context.Canceled and names the current holder, and the abandoned wait
// never leaves the lock held: a blocked flock(2) cannot be called off, so
// if the kernel grants it later the lock is dropped at once (a TryAcquire
// elsewhere in that instant may find it busy, held by this process).
func Acquire(ctx context.Context, target string, opts ...Option) (*Lock, error) {
	if len(opts) == 0 {
		var c config
		c.defaults()
		return c.acquire(ctx, target)
	}
	c, err := configFor(inAcquire, target, opts)
	if err != nil {
		return nil, err
	}
	return c.acquire(ctx, target)
}

// acquire is Acquire with the options applied: Do, Update and Append
// take their locks through it.
func (c *config) acquire(ctx context.Context, target string) (*Lock, error) {
	c.dl.Caller, c.dl.CallerKeeps = proc.Caller(ctx), proc.CallerKeeps(ctx)
	req, err := c.request(target)
	if err != nil {
		return nil, err
	}
	if req.Slots > 1 {
		return c.acquireSlot(ctx, target, req, true)
	}
	// Made before the lock is taken, for the same reason as the kernel
	// lock's handle is (internal/flock's lockOpened): less to do while
	// holding it.
	l := new(Lock)
	n := c.beginNamed(req)
	var h Handle
	if c.dl.TryFirst() {
		// Try first: only a busy lock can be a deadlock, and only the
		// holder's error names who holds it. A free lock is taken here,
		// with nothing looked at that only a busy one needs.
		h, err = c.protocol.TryAcquire(req)
		if derr := c.dl.Busy(req, err); derr != nil {
			n.abort()
			return nil, derr
		}
	}
	if h == nil {
		h, err = c.dl.Wait(ctx, req)
	}
	alone := false
	if r, ok := c.ownAlone(target, req, err); ok {
		req, alone = r, true
		h, err = c.protocol.Acquire(ctx, req)
	}
	if err != nil {
		n.abort()
		return nil, c.rewriteDirHint(target, err)
	}
	if h, err = n.finish(ctx, true, c, req, h); err != nil {
		return nil, err
	}
	if !alone {
		if h, err = c.lockOwn(ctx, h, target, true); err != nil {
			return nil, err
		}
	}
	return c.newLock(l, h, target, req)
}

// newLock wraps a handle the protocol granted into a Lock, l, counted
// among the locks this process holds.
func (c *config) newLock(l *Lock, h Handle, target string, req *Request) (*Lock, error) {
	own := ""
	if o, ok := h.(*ownHandle); ok {
		own = o.own.Path()
	}
	h = logged(h, c.logger, req.Path)
	l.h, l.target, l.path, l.proto = h, target, req.Path, c.protocol.Name()
	l.held.Note(h, c.protocol, req.Path, own, req.Shared)
	return c.refuseIfMachineLocal(l)
}

// TryAcquire takes the lock on target if nobody holds it, and never waits.
// When someone does, it returns an *Error matching ErrBusy whose Holder
// describes them.
func TryAcquire(target string, opts ...Option) (*Lock, error) {
	if len(opts) == 0 {
		var c config
		c.defaults()
		return c.tryAcquire(target)
	}
	c, err := configFor(inTryAcquire, target, opts)
	if err != nil {
		return nil, err
	}
	return c.tryAcquire(target)
}

// tryAcquire is TryAcquire with the options applied.
func (c *config) tryAcquire(target string) (*Lock, error) {
	req, err := c.request(target)
	if err != nil {
		return nil, err
	}
	if req.Slots > 1 {
		return c.acquireSlot(context.Background(), target, req, false)
	}
	n := c.beginNamed(req)
	h, err := c.protocol.TryAcquire(req)
	alone := false
	if r, ok := c.ownAlone(target, req, err); ok {
		req, alone = r, true
		h, err = c.protocol.TryAcquire(req)
	}
	if err != nil {
		n.abort()
		return nil, c.rewriteDirHint(target, err)
	}
	if h, err = n.finish(context.Background(), false, c, req, h); err != nil {
		return nil, err
	}
	if !alone {
		if h, err = c.lockOwn(context.Background(), h, target, false); err != nil {
			return nil, err
		}
	}
	return c.newLock(new(Lock), h, target, req)
}

// Do acquires the lock on target, runs fn, and releases the lock whatever fn
// does, a panic included (the panic then continues). It returns fn's error;
// when fn succeeded but the lock turned out to be lost, it returns the
// ErrLost error from Release, because fn's work was then not protected.
//
// The context fn receives is cancelled if the lock is found lost while fn
// runs (see Lock.Lost: a lease or heartbeat that failed, or a kernel lock
// whose lock file was removed or replaced, which is looked for once a
// second). It also tells the deadlock search (DeadlockAfter) that a wait
// made with it keeps this lock until it ends: a nested Do that waits for
// another lock held by a process that waits for this one is a deadlock.
// Give it only to goroutines that fn waits for.
func Do(ctx context.Context, target string, fn func(ctx context.Context) error, opts ...Option) (err error) {
	c, err := configFor(inDo, target, opts)
	if err != nil {
		return err
	}
	l, err := c.acquire(ctx, target)
	if err != nil {
		return err
	}
	// fn's waits keep l until fn returns (internal/deadlock's cycle.go).
	l.kept = deadlock.Kept{Context: ctx, Held: &l.held}
	fctx, cancel := context.WithCancelCause(&l.kept)
	if lost := l.Lost(); lost != nil {
		go func() {
			select {
			case <-lost:
				cancel(l.lostError())
			case <-fctx.Done():
			}
		}()
	}
	defer func() {
		cancel(nil)
		rerr := l.Release()
		if err == nil {
			err = rerr
		}
	}()
	return fn(fctx)
}

func (l *Lock) lostError() error {
	return &Error{Op: "hold", Path: l.path, Err: ErrLost}
}

// Discard releases the lock as Release does and also removes its lock
// file, when this acquisition created it and no other process has it
// open, so that an operation that failed leaves nothing it created
// behind. Only a kernel lock file that this acquisition created is
// removed, and only on Linux, where a write lease proves that no other
// process has it open; any other lock file stays, as after Release.
func (l *Lock) Discard() error {
	for h := l.h; h != nil; {
		if d, ok := h.(lock.Discarder); ok {
			d.DiscardOnRelease()
			break
		}
		w, ok := h.(lock.Wrapper)
		if !ok {
			break
		}
		h = w.Unwrap()
	}
	return l.Release()
}

// Release gives the lock up. It is idempotent: calls after the first return
// nil, unless the lock had been lost, which every call reports (ErrLost).
func (l *Lock) Release() error {
	err := l.h.Release()
	l.held.Forget()
	return err
}

// Token returns the fencing token of this acquisition: a number that
// strictly increases with every exclusive acquisition of the lock path,
// across processes and restarts. Pass it to the resource you write, and have
// the resource refuse writes carrying a smaller token than it has seen: that
// keeps a holder that was paused past losing its lock from doing harm. For a
// shared hold it is the token of the last exclusive holder. Zero means no
// token is available; TokenError says why.
//
// Ask while holding the lock. A kernel lock writes its record and token
// only when they are asked for (or once it has been held a moment), so a
// short hold nobody asks about costs no more than gofrs/flock's; asked
// first after Release, Token is 0.
func (l *Lock) Token() uint64 { return l.h.Fence() }

// TokenError returns nil when Token is a fencing token, and otherwise an
// *Error matching ErrNoToken whose Hint says why there is none: the lock
// file is not hold's to write (a file named with LockFile that holds data
// or belongs to another tool, one with several hard links, another user's
// file, one this process may not write), or the protocol keeps no tokens
// (the portable protocol). Such a lock still excludes every other holder;
// only its record and token are missing.
func (l *Lock) TokenError() error {
	h := l.h
	if w, ok := h.(lock.Wrapper); ok {
		h = w.Unwrap()
	}
	if r, ok := h.(lock.TokenReasoner); ok {
		return r.TokenError()
	}
	if l.h.Fence() != 0 {
		return nil
	}
	return &Error{Op: "token", Path: l.path, Err: ErrNoToken, Hint: "the " + l.proto + " protocol keeps no fencing token"}
}

// Owner returns the owner record this holder published.
func (l *Lock) Owner() Owner { return *l.h.Owner() }

// Lost returns a channel that is closed if the lock is found to be no
// longer this holder's; Check then says why. Every protocol watches its
// own locks for this. A kernel lock holds while this process keeps it; it
// is lost only if someone removes or replaces its lock file (newcomers
// then lock the new file), and the first call of Lost (or AfterLost)
// starts a look at the lock path once a second until Release, from one
// timer per process: a lock nobody watches costs nothing for it.
func (l *Lock) Lost() <-chan struct{} { return l.h.Lost() }

// Check returns nil while the lock is held, and an error matching ErrLost or
// ErrReleased otherwise. It looks at the lock itself (a kernel lock's path:
// one stat), so it finds a loss at once, and closes Lost when it does.
// Update calls it just before publishing.
func (l *Lock) Check() error { return l.h.Check() }

// Path returns the lock path.
func (l *Lock) Path() string { return l.path }

// Target returns the target the lock was taken for (may be empty).
func (l *Lock) Target() string { return l.target }

// Protocol returns the name of the protocol holding the lock: "flock",
// "dir" or "etcd".
func (l *Lock) Protocol() string { return l.proto }

// File returns the open lock file of a kernel lock, and nil for other
// protocols. A kernel lock belongs to the open file, so a child process
// given this file (exec.Cmd.ExtraFiles) shares the lock and keeps it held
// even if this process dies, which is what flock(1) does for its command.
func (l *Lock) File() *os.File {
	if f, ok := l.h.(lock.Filer); ok {
		return f.File()
	}
	return nil
}

// Files returns every open file that keeps a kernel lock, File's first,
// and nil for other protocols. A plain lock has one; a semaphore's slot
// (Slots) also needs its shared hold of the lock file, which keeps a plain
// lock out (another N is kept out by the slot file's own lock). A program
// that passes the lock to a child process passes it all of them, so that
// the child keeps the whole lock if this process dies, as `hold run` does
// (the command's fds 3 and 4).
func (l *Lock) Files() []*os.File {
	f := l.File()
	if f == nil {
		return nil
	}
	files := []*os.File{f}
	for h := l.h; h != nil; {
		if k, ok := h.(lock.FileKeeper); ok {
			return append(files, k.KeepingFiles()...)
		}
		w, ok := h.(lock.Wrapper)
		if !ok {
			break
		}
		h = w.Unwrap()
	}
	return files
}

// Inspect reports the state of the lock on target without taking it: free,
// held exclusive or shared (decided by the lock itself, not by the record),
// the holder's owner record, whether the holder is alive, and the last
// fencing token. It never creates the lock file. A lock path whose
// directory does not exist is an error that matches fs.ErrNotExist, not a
// free lock: nothing could take a lock there until the directory is made
// (see MakeDirs), so "free" would send the caller the wrong way.
func Inspect(target string, opts ...Option) (*Status, error) {
	return inspect(inInspect, target, opts)
}

// inspect is Inspect, called as the entry point in.
func inspect(in entry, target string, opts []Option) (*Status, error) {
	c, err := configFor(in, target, opts)
	if err != nil {
		return nil, err
	}
	if err := c.refuseNUL(target); err != nil {
		return nil, err
	}
	path, err := c.lockPath(target)
	if err != nil {
		return nil, err
	}
	st, err := c.inspectPath(path)
	if err == nil && st != nil && st.State == Free {
		if err := c.refuseMissingDir(path); err != nil {
			return nil, err
		}
	}
	return c.inspectOwn(c.inspectEarlier(st, path), target), err
}

// inspectPath asks the protocol for the state of the lock at path: its
// InspectSlots when path is a semaphore's (Slots), otherwise judged by the
// caller's stale time (StaleAfter) where the protocol judges by age.
func (c *config) inspectPath(path string) (*Status, error) {
	if sem, ok := c.protocol.(lock.Semaphore); ok {
		if st, err := sem.InspectSlots(path); err == nil && st != nil && st.Slots > 0 {
			if st.State == Free && st.StoppedTurn == "" {
				// A kernel semaphore's waiters queue in fairq's
				// line at its count file, fair or not: name a
				// stopped one at the front.
				st.StoppedTurn = fairq.StoppedTurn(flock.CountPath(path))
			}
			return st, nil
		}
	}
	if si, ok := c.protocol.(lock.StaleInspector); ok && c.stale > 0 {
		return si.InspectStale(path, c.stale)
	}
	return c.protocol.Inspect(path)
}

// refuseMissingDir is Inspect's error for a free lock at path whose
// directory does not exist, of a lock that lives in this machine's files
// (not a named lock: its directory is made when first needed, and not a
// protocol with its own namespace).
func (c *config) refuseMissingDir(path string) error {
	if c.named {
		return nil
	}
	if _, ok := c.protocol.(lock.Namer); ok {
		return nil
	}
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return &Error{Op: "inspect", Path: path, Err: missingDir(dir),
		Hint: "nothing holds a lock there, and nothing can take one until the directory is made"}
}

// missingDir is the directory of a lock path that does not exist; it
// matches fs.ErrNotExist.
type missingDir string

func (d missingDir) Error() string      { return "the directory " + string(d) + " does not exist" }
func (missingDir) Is(target error) bool { return target == fs.ErrNotExist }
