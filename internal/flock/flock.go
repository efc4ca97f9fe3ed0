// Package flock is hold's default protocol: a kernel lock on the lock file,
// flock(2) on unix and LockFileEx on Windows.
//
// The kernel does the hard parts: it wakes a blocked waiter the moment the
// lock is released, and it releases the lock of a process that dies, so no
// staleness rule is needed. What this package adds is the owner record and
// the fencing token, kept in the lock file itself, and a wait that a context
// can end.
//
// Every acquisition opens its own descriptor: flock(2) locks belong to the
// open file description, so two descriptors in one process exclude each
// other just as two processes do. The lock file is never deleted: removing it
// on release would let a waiter that opened the old file lock an inode that
// no longer has a name while a newcomer locks a fresh one.
package flock

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/resched"
	"github.com/hold-dev/hold/lock"
)

// The capabilities hold finds in a kernel lock's handle.
var (
	_ lock.Filer         = (*handle)(nil)
	_ lock.TokenReasoner = (*handle)(nil)
	_ lock.LostNotifier  = (*handle)(nil)
)

// Protocol implements lock.Protocol with kernel locks. The zero value is
// ready to use.
type Protocol struct{}

// Name returns "flock".
func (Protocol) Name() string { return "flock" }

// TryAcquire takes the lock if it is free, without waiting.
func (p Protocol) TryAcquire(req *lock.Request) (lock.Handle, error) {
	return p.acquire(context.Background(), req, false)
}

// Acquire waits until the lock is held or ctx ends.
func (p Protocol) Acquire(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(err)}
	}
	return p.acquire(ctx, req, true)
}

func (p Protocol) acquire(ctx context.Context, req *lock.Request, wait bool) (lock.Handle, error) {
	h, eager, err := p.take(ctx, req, wait, false)
	for wait && errors.Is(err, errOrphaned) {
		// Slots are held beside this lock file, which replaced the one
		// they hold: wait for them to let go (they are told of the loss).
		select {
		case <-ctx.Done():
			return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(ctx.Err()), Holder: errHolder(err),
				Hint: "gave up while slots of a semaphore were held under a lock file that was removed or replaced"}
		case <-time.After(countPoll):
		}
		h, eager, err = p.take(ctx, req, wait, false)
	}
	if err == nil && h.writable && h.tokenErr != nil {
		// Locked without a record (an explicit path holding the user's
		// data, as flock(1)'s idiom locks a script or a data file): hold
		// it as flock(1) does, on a read-only descriptor, so that holding
		// it stops nobody from executing the file ("text file busy"). A
		// lock cannot move to another descriptor, so this one lets go and
		// the read-only one takes it anew. Only such files pay for it;
		// the files hold writes are never reopened.
		h.f.release()
		h, eager, err = p.take(ctx, req, wait, true)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case eager:
		h.mu.Lock()
		h.publishLocked()
		h.mu.Unlock()
	case !req.Shared && h.tokenErr == nil && !kernelNamesHolders:
		// Nothing but the record can name this holder to others.
		h.mu.Lock()
		h.publishLocked()
		h.mu.Unlock()
	case !req.Shared && h.tokenErr == nil && lazy.warm() && proc.ReadyRuntime() == nil:
		// (Where the runtime cannot make the poller the lazy timer needs,
		// for want of descriptors, the record is written now instead.)
		h.listed, h.since = true, h.owner.StartedAt
		lazy.add(h)
	default:
		if !req.Shared && h.tokenErr == nil {
			// A process's first exclusive hold writes its record at once
			// (see holders.warm).
			h.mu.Lock()
			h.publishLocked()
			h.mu.Unlock()
		}
	}
	if req.Logger != nil {
		req.Logger.Debug("hold: acquired", "path", req.Path, "shared", req.Shared)
	}
	return h, nil
}

// take opens the lock file (read-only when readOnly), locks it, waiting if
// wait says so, and judges what the holder may do with it (see judge).
func (p Protocol) take(ctx context.Context, req *lock.Request, wait, readOnly bool) (h *handle, eager bool, err error) {
	m := openMode{beforeCreate: req.BeforeCreate, explicit: req.Explicit, readOnly: readOnly, perm: uint32(req.Mode.Perm())}
	f, writable, err := openLockFile(req.Path, m)
	if err != nil && req.MakeDirs && errors.Is(err, fs.ErrNotExist) {
		// The lock file's directory is missing, and the caller asked
		// for it to be made (with the usual mode under the umask).
		if os.MkdirAll(filepath.Dir(req.Path), 0o777) == nil {
			f, writable, err = openLockFile(req.Path, m)
		}
	}
	if err != nil {
		return nil, false, err
	}
	return p.lockOpened(ctx, req, f, writable, wait, readOnly)
}

// lockOpened locks f, the lock file take just opened, and judges it.
//
// The lock is tried first and the file looked at after (identify): that
// one statx then says both what the file is and, the lock being held,
// that it kept its name (replaced), where a look before the lock needed a
// second system call after it for the second. An uncontended acquisition
// is so open, flock, statx, close. What this costs: a file hold refuses (a
// FIFO or a device planted at the lock path, a directory lock of the
// portable protocol at an explicit one) is held for an instant before the
// refusal, never waited for, and let go at once, with the refusal it had
// before; and a contended acquisition tries once without blocking before
// it waits, as it must to look at the file before any wait.
func (p Protocol) lockOpened(ctx context.Context, req *lock.Request, f *lockFile, writable, wait, readOnly bool) (h *handle, eager bool, err error) {
	// The handle is made before the lock is tried, not after: on a busy
	// machine every instant the lock is held is an instant in which its
	// holder may lose its CPU and keep everyone waiting, so the work that
	// needs no lock is done before it.
	h = &handle{f: f, path: req.Path, owner: req.Owner, writable: writable, fenceAbove: req.FenceAbove}
	h.owner.Shared = req.Shared
	h.owner.Protocol = "flock"
	waited := false
	err = f.lock(req.Shared, false)
	if ierr := f.identify(req.Explicit); ierr != nil {
		f.release()
		return nil, false, ierr
	}
	if writable && f.otherUsers() {
		// Another user's file, and this process runs as root: hold will
		// not write into it, so it holds it on a read-only descriptor
		// (as for the files acquire reopens), before any wait.
		f.release()
		return p.take(ctx, req, wait, true)
	}
	if err != nil && isBusy(err) {
		// A derived path holding another tool's file is refused as such,
		// not reported busy, and not after a wait.
		if ferr := checkForeign(f, req); ferr != nil {
			f.close()
			return nil, false, ferr
		}
		if !wait {
			if !req.Shared {
				if e := gateBusy(req.Path); e != nil {
					f.close()
					return nil, false, e
				}
			}
			h := holderOf(f, false)
			f.close()
			return nil, false, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrBusy, Holder: h, Hint: deadHolderHint(h)}
		}
		if req.Logger != nil {
			req.Logger.Debug("hold: waiting for lock", "path", req.Path, "shared", req.Shared)
		}
		wctx := ctx
		if req.Watch != nil {
			wctx = req.Watch.Waiting(ctx)
		}
		var abandoned bool
		if abandoned, err = waitLock(wctx, f, req.Shared); abandoned {
			// f now belongs to the abandoned wait, which closes it.
			h := holderAt(req.Path)
			return nil, false, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(err), Holder: h, Hint: deadHolderHint(h)}
		}
		if err == nil {
			// What identify saw came before the wait.
			f.refresh()
		}
		waited = true
	}
	if err != nil {
		f.close()
		return nil, false, lockError(req.Path, err)
	}
	if f.replaced(req.Path) {
		// The file was renamed over (or removed) between our open and
		// our lock: an update of a file named "x.lock" (or a tool
		// saving it under `hold run x.lock`) replaces it under its own
		// kernel lock, which we were then waiting for. Our lock is on an inode nobody else will open;
		// start again on the file the path names now.
		f.release()
		return p.take(ctx, req, wait, readOnly)
	}
	h.waited = waited
	h.owner.StartedAt = time.Now()
	eager, err = h.judge(req.Explicit)
	if err != nil {
		h.Release()
		return nil, false, err
	}
	return h, eager, nil
}

// waitLock blocks in the kernel until the lock is granted or ctx ends. A
// blocked flock(2) cannot be interrupted from Go (signals restart it and
// closing the descriptor does not wake it), so the blocking call runs on its
// own goroutine. If ctx ends first the wait is abandoned (abandoned is true
// and err is ctx's error): that goroutine keeps waiting and, the moment it
// is granted the lock, unlocks and closes the descriptor, so an abandoned
// wait never leaves the lock held. The cost is one parked OS thread per
// abandoned waiter until the holder lets go, and a waiter that is handed
// the lock in the instant its context ends gives it straight back.
//
// Otherwise the caller keeps f, locked when err is nil.
//
// A wait nothing can end blocks on the caller's goroutine, and first
// passes the process's scheduler gate (internal/resched), as the fair
// queue's waits do: through the Go scheduler at most once per 5 ms per
// process. Without it, a process handing a lock around with others never
// passes through the scheduler (its waits are rare and block in the
// kernel, its other cycles take a free lock), the runtime's monitor takes
// its processor away in every system call it finds it in, and wakes every
// 20 µs to do so: 8 and 30 processes on 2 CPUs made 11-18% fewer
// hand-offs for it (docs/bench.md). The hold a wait gets passes nothing on
// its release (see handle.Release). A pass before every wait, not rationed,
// cost a tenth to a fifth of the processes' CPU time.
func waitLock(ctx context.Context, f *lockFile, shared bool) (abandoned bool, err error) {
	if ctx.Done() == nil {
		resched.BeforeBlocking()
		return false, f.lock(shared, true)
	}
	done := make(chan error, 1)
	go func() { done <- f.lock(shared, true) }()
	select {
	case err := <-done:
		return false, err
	case <-ctx.Done():
		go func() {
			if err := <-done; err == nil {
				f.unlock()
			}
			f.close()
		}()
		return true, ctx.Err()
	}
}

// handle is one held kernel lock.
type handle struct {
	f        *lockFile
	path     string
	writable bool // the lock file was opened for writing
	// fenceAbove is lock.Request.FenceAbove.
	fenceAbove string
	// fenceFloor is a token the next one must exceed: the last token of
	// any slot of the semaphore this lock is a slot of (see slots.go).
	fenceFloor uint64

	mu    sync.Mutex
	owner lock.Owner
	// published: the record was written, or it was decided that none
	// will be (see publishLocked).
	published bool
	// read: judge read the file under the lock; readSize and readFence
	// are what it found (the file's size and its last token).
	read      bool
	readSize  int64
	readFence uint64
	// listed: the handle is in lazy, until its record is written or it
	// is released; since is when it was listed.
	listed bool
	since  time.Time
	// recordLen is the length of the record this holder wrote, 0 when it
	// wrote none.
	recordLen int
	// record is what this holder wrote, so that erase can tell it from
	// what the holder's command wrote over it since.
	record []byte
	// tokenErr says why this holder has no token (see TokenError).
	tokenErr error
	released bool
	// discard: Release removes the lock file if this acquisition created
	// it and nobody else has it open (DiscardOnRelease).
	discard bool
	// watched: Lost put the handle in watch (see watch.go), which Release
	// takes it out of.
	watched bool
	// waited: the lock was busy and this acquisition waited for it
	// (see Release).
	waited bool
	// lost is marked when Check, or the watch's look, finds the lock file
	// removed or replaced.
	lost lock.LostState
	// also lists the other files the hold stands on, watched with its
	// own: a semaphore slot's gate and count file (see slots.go).
	also []keptFile
	// slotFile: the lock file is a semaphore's slot, whose token
	// assignToken hands out (publishLocked looks at no count file).
	slotFile bool
}

// keptFile is a file a hold stands on besides its lock file, and the path
// that must go on naming it while the hold lasts.
type keptFile struct {
	f    *lockFile
	path string
}

// Fence returns the fencing token, writing the record first if it was not
// written yet: a token is handed out only together with the record that
// makes the next holder's larger.
func (h *handle) Fence() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.publishLocked()
	return h.owner.Fence
}

// TokenError says why Fence is 0, or nil when it is a token.
func (h *handle) TokenError() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.publishLocked()
	return h.tokenErr
}

// Owner returns a copy of the published record (writing it first if it
// was not yet); the caller may change the copy.
func (h *handle) Owner() *lock.Owner {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.publishLocked()
	o := h.owner
	o.Command = append([]string(nil), o.Command...)
	if o.Fields != nil {
		o.Fields = make(map[string]string, len(h.owner.Fields))
		for k, v := range h.owner.Fields {
			o.Fields[k] = v
		}
	}
	return &o
}

// Lost returns a channel closed once the lock is found lost. The kernel
// keeps the lock while the descriptor is open, so it is lost only when its
// lock file is removed or replaced: the lock then guards a file nobody
// else will open, and newcomers lock the new one. The first call puts the
// hold in the process's watch, which looks at the path every lossPoll
// until Release (see watch.go); Check looks at once.
func (h *handle) Lost() <-chan struct{} {
	h.startWatch()
	return h.lost.Lost()
}

// AfterLost runs f once the lock is found lost, watching it as Lost does
// (see lock.LostNotifier): without a goroutine per hold.
func (h *handle) AfterLost(f func()) (stop func() bool) {
	h.startWatch()
	return h.lost.AfterLost(f)
}

// startWatch puts the hold in the watch, unless it is there already,
// released or lost.
func (h *handle) startWatch() {
	h.mu.Lock()
	if !h.watched && !h.released && !h.lost.Marked() {
		h.watched = watch.add(h)
	}
	h.mu.Unlock()
}

// lostWhy is the Hint of a lost kernel lock's error.
const lostWhy = "the lock file was removed or replaced while held, so others may have locked its successor"

// File returns the open lock file, so that `hold run` can pass the
// descriptor (and with it the lock) to the command it runs. After Release
// it is closed.
func (h *handle) File() *os.File { return h.f.file() }

// Check reports ErrReleased after Release, and ErrLost when the lock path
// no longer names the file this lock is on (one stat of the path).
func (h *handle) Check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.lost.Err("check", h.path); err != nil {
		return err
	}
	if h.released {
		return &lock.Error{Op: "check", Path: h.path, Err: lock.ErrReleased}
	}
	if same, err := h.f.namedBy(h.path); err == nil && !same {
		h.lost.MarkLost(lostWhy)
		return h.lost.Err("check", h.path)
	}
	for _, k := range h.also {
		if same, err := k.f.namedBy(k.path); err == nil && !same {
			h.lost.MarkLost(k.path + ", which this semaphore slot stands on, was removed or replaced while held, so others may hold beside it")
			return h.lost.Err("check", h.path)
		}
	}
	return nil
}

// Release unlocks and closes (see lockFile.release: once the descriptor was
// handed to a command, closing alone would leave the lock with the command).
// Once Check has found the lock lost, every Release says so.
func (h *handle) Release() error {
	first, err := h.release()
	switch {
	case first && !h.waited:
		// A loop taking a free lock makes all its system calls on its
		// goroutine and nothing else: it would never pass through the
		// Go scheduler, and after 10 ms the runtime's monitor thread
		// would take its processor away in every one of them
		// (internal/resched).
		resched.AfterCycle()
	case first:
		// A hold that waited does not pass (see waitLock), and tells
		// the gate that this process's locks are contended.
		resched.AfterWait()
	}
	return err
}

// release is Release, but for the pass through the scheduler; first is
// false when the hold was released already.
func (h *handle) release() (first bool, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return false, h.lost.Err("release", h.path)
	}
	h.released = true
	var uerr, cerr error
	early := h.recordLen == 0 && !h.watched && !h.discard
	if early {
		// Nothing to write or remove under the lock: let go of it first,
		// and take the hold out of the lazy list after, so that the next
		// holder (on a busy machine, a process that was waiting for this
		// one's time slice) is not kept waiting by this bookkeeping. The
		// list's looks take h.mu, held here, and find h released.
		uerr, cerr = h.f.release()
	}
	h.unlist()
	if h.watched {
		watch.remove(h)
	}
	h.erase()
	if h.discard {
		h.f.removeIfAlone()
	}
	if !early {
		uerr, cerr = h.f.release()
	}
	if uerr != nil {
		return true, &lock.Error{Op: "release", Path: h.path, Err: uerr}
	}
	if cerr != nil {
		return true, &lock.Error{Op: "release", Path: h.path, Err: cerr}
	}
	return true, h.lost.Err("release", h.path)
}

// DiscardOnRelease makes Release also remove the lock file when this
// acquisition created it and no other process has it open (Linux; see
// removeIfAlone): for a command that failed and should leave nothing it
// created behind. It implements lock.Discarder.
func (h *handle) DiscardOnRelease() {
	h.mu.Lock()
	h.discard = true
	h.mu.Unlock()
}

// deadHolderHint explains a kernel lock that is held although its recorded
// holder is dead: the lock belongs to the open file, so a process that
// inherited the descriptor (typically the command `hold run` started) still
// has it, or, after a holder that was killed, a tool that writes no owner
// record took the lock.
func deadHolderHint(h *lock.Holder) string {
	if h == nil || h.Alive != lock.Dead {
		return ""
	}
	return "the recorded holder is dead but the lock is held: by a process that inherited its descriptor (such as a command it started), or by a tool that writes no owner record; `hold status` lists the processes that have the lock file open"
}
