package flock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hold-dev/hold/internal/resched"
	"github.com/hold-dev/hold/lock"
)

// Kernel semaphores (lock.Semaphore): N slots at one lock path P, each a
// kernel lock of its own, so that flock(1) can take one by hand and a
// crashed holder's slot is free the moment the kernel closes its
// descriptor.
//
// The files, beside the lock file P:
//
//	P          the lock file: every slot holder holds it shared, so that a
//	           plain (exclusive) lock of P and the slots exclude each other
//	P.slots    the count file, "N TOKEN": the N in use and the last fencing
//	           token of any slot; every slot holder holds it shared
//	P.slotK    slot K, for K from 0 to N-1, held exclusively by its holder,
//	           which writes its owner record there as into a lock file
//
// plus the queue of waiters, fairq's queue of the path P.slots
// ("P.slots.queue" on Linux, the directory "P.slots.q" elsewhere).
//
// A shell user takes slot 3 by hand as `flock -s P flock P.slot3 cmd`
// (the outer shared lock keeps a plain holder of P out, as a slot holder
// of hold's does); hold counts such a slot as held.
//
// An acquisition:
//
//  1. Joins the queue and waits until every waiter that came earlier has
//     left it: waiters are served in arrival order, and only the first in
//     line looks at the slots, so nobody sleeps on a busy slot while
//     another is free, and the tokens below are handed out one at a time.
//  2. Locks the count file shared and reads N. Another N while any slot is
//     held is ErrSlotCount: the count file is then held shared by those
//     holders, so the exclusive lock needed to rewrite N is refused. When
//     no slot is held that lock is granted, and N is rewritten.
//  3. Locks P shared: a plain holder of P is waited for.
//  4. Tries slots 0 to N-1 without waiting and keeps the first it gets.
//     When all are busy, it waits on all of them at once, one blocked
//     flock(2) per slot on a goroutine of its own, and keeps the first
//     slot it takes. These waits ask for a shared lock of the slot file,
//     which the kernel grants the moment no one holds the slot (its
//     holder released it or died): nothing polls. A granted wait lets go
//     at once and takes the slot exclusively without waiting, or waits
//     again when someone else took it first. (A blocked flock(2) cannot
//     be called off, so the waits on the other slots stay parked, one
//     thread each, until their slot is next released; they then let go
//     at once.)
//  5. Writes its owner record into the slot with a token one above the
//     count file's and every earlier token of the slot, records the token
//     in the count file, and leaves the queue.
//
// Release lets go of the slot, then of P and the count file. A crash at
// any step frees everything at once: all of it is kernel locks.
//
// A slot is held when its file is locked exclusively; that is all hold
// status, hold ls and a try count (heldExclusively). A shared lock of a
// slot file is never a holder: it is a parked wait's grant, let go the
// instant it is made, or someone's look at the slot (hold status probes
// with one). Such an instant can still refuse an exclusive try, which is
// why a try that finds a slot free but for shared locks tries again
// (takeFree), and why a parked wait never asks for the slot exclusively:
// one granted to a wait that has no use for it made the slot look held,
// by a process that did not hold it, until that wait let go.

// SlotsSuffix is appended to a lock path to name its semaphore's count
// file; slot K is the lock path with SlotSuffix and K appended.
const (
	SlotsSuffix = ".slots"
	SlotSuffix  = ".slot"
)

// SlotPath returns the path of slot k of the semaphore at the lock path
// path: "path.slotK".
func SlotPath(path string, k int) string { return path + SlotSuffix + strconv.Itoa(k) }

// CountPath returns the path of the count file of the semaphore at path.
func CountPath(path string) string { return path + SlotsSuffix }

// SlotQueue joins the queue of the semaphore at req.Path and, when wait is
// set, returns once every earlier waiter has left it; leave gives the
// place up. Without wait, a queue with waiters ahead is an error matching
// lock.ErrBusy.
type SlotQueue func(ctx context.Context, req *lock.Request, wait bool) (leave func(), err error)

// slotQueue is the queue semaphores wait in, which internal/fairq installs
// (SetSlotQueue): it imports this package, so it cannot be called directly.
var slotQueue SlotQueue

// SetSlotQueue installs the queue that orders a semaphore's waiters;
// internal/fairq calls it from init.
func SetSlotQueue(q SlotQueue) { slotQueue = q }

// The capabilities of the protocol and of a slot's handle.
var (
	_ lock.Semaphore  = Protocol{}
	_ lock.SlotHandle = (*slotHandle)(nil)
)

// AcquireSlot waits until it holds one of req.Slots slots of the
// semaphore at req.Path, or ctx ends.
func (p Protocol) AcquireSlot(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(err)}
	}
	return p.acquireSlot(ctx, req, true)
}

// TryAcquireSlot takes a free slot without waiting; ErrBusy when all are
// held (or earlier waiters are queued for the next one), naming every
// holder.
func (p Protocol) TryAcquireSlot(req *lock.Request) (lock.Handle, error) {
	return p.acquireSlot(context.Background(), req, false)
}

// acquireSlot is the one path of AcquireSlot and TryAcquireSlot (see the
// steps above).
func (p Protocol) acquireSlot(ctx context.Context, req *lock.Request, wait bool) (lock.Handle, error) {
	n := req.Slots
	switch {
	case n < 1:
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: fmt.Errorf("%w: %d slots", lock.ErrInvalidOption, n),
			Hint: "a semaphore has at least one slot"}
	case req.Shared:
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: fmt.Errorf("%w: a shared hold of a semaphore slot", lock.ErrInvalidOption),
			Hint: "a slot is held by one holder; ask for slots or for a shared lock, not both"}
	case slotQueue == nil:
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrUnsupported,
			Hint: "kernel semaphores wait in the fair queue, which this program does not link"}
	}
	if req.MakeDirs {
		// The queue is made before any lock file, in the same directory.
		if err := os.MkdirAll(filepath.Dir(req.Path), 0o777); err != nil {
			return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: err}
		}
	}
	leave, err := slotQueue(ctx, req, wait)
	if err != nil && !wait && errors.Is(err, lock.ErrBusy) {
		leave, err = p.tryBehind(req)
	}
	if err != nil {
		return nil, err
	}
	defer leave()
	m := openMode{beforeCreate: req.BeforeCreate, perm: uint32(req.Mode.Perm())}
	count, fence, err := lockCount(ctx, req, m, wait)
	if err != nil {
		return nil, err
	}
	gm := m
	gm.explicit = req.Explicit
	gate, err := lockGate(ctx, req, gm, wait)
	if err != nil {
		count.release()
		return nil, err
	}
	if rec := readOwner(gate); rec != nil && rec.Fence > fence {
		// Above the plain lock's tokens too.
		fence = rec.Fence
	}
	h, k, err := p.takeSlot(ctx, req, m, wait)
	if err != nil {
		gate.release()
		count.release()
		return nil, err
	}
	h.mu.Lock()
	h.fenceFloor = fence
	h.publishLocked()
	token := h.owner.Fence
	h.mu.Unlock()
	if token > fence {
		// Best effort: the slot's own record keeps its token too, and the
		// next holder of this slot continues from it.
		writeCount(count, n, token)
	}
	if req.Logger != nil {
		req.Logger.Debug("hold: acquired slot", "path", req.Path, "slot", k, "slots", n)
	}
	return &slotHandle{handle: h, slot: k, count: count, gate: gate}, nil
}

// tryPass bounds how long a try waits behind the waiters queued ahead of
// it while a slot is free: they are taking free slots, which takes them
// microseconds, and the try then looks at the slots itself. Only against
// a queue that does not move (a first waiter stopped with Ctrl-Z) does it
// matter.
const tryPass = 2 * time.Second

// tryBehind is a try's answer to a queue with waiters ahead: busy, naming
// every holder, when every slot is held; otherwise it waits its turn
// (at most tryPass), since those waiters are taking free slots, and the
// try is busy only if they leave none.
func (p Protocol) tryBehind(req *lock.Request) (func(), error) {
	if st, err := p.InspectSlots(req.Path); err == nil && st.Slots == req.Slots {
		free := false
		for _, h := range st.SlotHolders {
			free = free || h == nil
		}
		if !free {
			return nil, slotsBusy(p, req.Path, "")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), tryPass)
	defer cancel()
	leave, err := slotQueue(ctx, req, true)
	if err != nil && ctx.Err() != nil {
		return nil, slotsBusy(p, req.Path, "earlier waiters queued for a slot did not move")
	}
	return leave, err
}

// openSlotFile opens one of a semaphore's files, making the missing
// directories when asked to.
func openSlotFile(path string, m openMode, makeDirs bool) (*lockFile, bool, error) {
	f, writable, err := openLockFile(path, m)
	if err != nil && makeDirs && errors.Is(err, fs.ErrNotExist) {
		if os.MkdirAll(filepath.Dir(path), 0o777) == nil {
			f, writable, err = openLockFile(path, m)
		}
	}
	return f, writable, err
}

// lockFor takes the lock on f, waiting (until ctx ends) when wait is set.
// On an error the file is closed (by the abandoned wait, when ctx ended).
func lockFor(ctx context.Context, f *lockFile, shared, wait bool) error {
	err := f.lock(shared, false)
	if err == nil {
		return nil
	}
	if !isBusy(err) || !wait {
		f.close()
		return err
	}
	if abandoned, err := waitLock(ctx, f, shared); abandoned || err != nil {
		if !abandoned {
			f.close()
		}
		return err
	}
	return nil
}

// lockCount locks the count file shared with n recorded in it (step 2),
// and returns it with the last token it holds.
func lockCount(ctx context.Context, req *lock.Request, m openMode, wait bool) (*lockFile, uint64, error) {
	path := CountPath(req.Path)
	n := req.Slots
	f, _, err := openSlotFile(path, m, req.MakeDirs)
	if err != nil {
		return nil, 0, err
	}
	for attempt := 0; ; attempt++ {
		if err := lockFor(ctx, f, true, wait); err != nil {
			return nil, 0, countLockError(req.Path, err, ctx)
		}
		inUse, fence, err := readCount(f)
		if err != nil {
			f.close()
			return nil, 0, &lock.Error{Op: "acquire", Path: path, Err: err}
		}
		if inUse == n {
			return f, fence, nil
		}
		f.unlock()
		err = f.lock(false, false)
		switch {
		case err == nil:
			// Nobody holds a slot: the number is this holder's to set.
			// Then back to the shared lock, and read again.
			werr := writeCount(f, n, fence)
			f.unlock()
			if werr != nil {
				f.close()
				return nil, 0, &lock.Error{Op: "acquire", Path: path, Err: werr,
					Hint: "the semaphore's count file could not be written"}
			}
			if attempt < 3 {
				continue
			}
		case !isBusy(err):
			f.close()
			return nil, 0, lockError(path, err)
		}
		f.close()
		return nil, 0, slotCountError(req.Path, inUse, n)
	}
}

// countLockError is the error of a failed lock of the count file.
func countLockError(path string, err error, ctx context.Context) error {
	if ctx.Err() != nil {
		return &lock.Error{Op: "acquire", Path: path, Err: lock.WaitError(ctx.Err()),
			Hint: "gave up while the semaphore's count file was locked exclusively"}
	}
	if isBusy(err) {
		return &lock.Error{Op: "acquire", Path: path, Err: lock.ErrBusy,
			Hint: "the semaphore's count file " + CountPath(path) + " is locked exclusively, which hold does only for an instant: someone holds it by hand"}
	}
	return lockError(CountPath(path), err)
}

// slotCountError says that the semaphore is held with inUse slots.
func slotCountError(path string, inUse, asked int) error {
	return &lock.Error{Op: "acquire", Path: path,
		Err:  fmt.Errorf("%w: %d in use, %d asked for", lock.ErrSlotCount, inUse, asked),
		Hint: fmt.Sprintf("every holder of a semaphore uses the same number of slots; ask for %d, or wait until no slot is held to change it", inUse)}
}

// readCount reads the count file: the N in use (0 when none is recorded)
// and the last token.
func readCount(f *lockFile) (n int, fence uint64, err error) {
	var buf [64]byte
	got, err := f.readAt(buf[:], 0)
	if err != nil && got == 0 && !errors.Is(err, io.EOF) {
		return 0, 0, err
	}
	return parseCount(string(buf[:got]))
}

// parseCount parses "N TOKEN\n"; an empty file records nothing.
func parseCount(s string) (n int, fence uint64, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, " ")
	if ok {
		n, err = strconv.Atoi(a)
		if err == nil {
			fence, err = strconv.ParseUint(strings.TrimSpace(b), 10, 64)
		}
	}
	if !ok || err != nil || n < 1 {
		return 0, 0, fmt.Errorf("%w: %q is not a semaphore's count file (\"N TOKEN\")", lock.ErrForeign, s)
	}
	return n, fence, nil
}

// writeCount records n and the last token in the count file.
func writeCount(f *lockFile, n int, fence uint64) error {
	b := fmt.Appendf(nil, "%d %d\n", n, fence)
	if err := f.writeAt(b, 0); err != nil {
		return err
	}
	return f.truncate(int64(len(b)))
}

// readCountAt reads the count file at path without locking it.
func readCountAt(path string) (n int, fence uint64, err error) {
	f, err := openForInspect(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.close()
	return readCount(f)
}

// lockGate locks the lock file itself shared (step 3), so that a plain
// holder and the slots never hold at once. A file renamed over or removed
// between the open and the lock is opened again.
func lockGate(ctx context.Context, req *lock.Request, m openMode, wait bool) (*lockFile, error) {
	for {
		f, _, err := openSlotFile(req.Path, m, req.MakeDirs)
		if err != nil {
			return nil, err
		}
		err = f.lock(true, false)
		if err != nil && isBusy(err) && !wait {
			h := holderOf(f, false)
			f.close()
			return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrBusy, Holder: h,
				Hint: "the lock itself is held exclusively, which keeps every slot of its semaphore out until it is released"}
		}
		if err != nil {
			if !isBusy(err) {
				f.close()
				return nil, lockError(req.Path, err)
			}
			if req.Logger != nil {
				req.Logger.Debug("hold: semaphore waiting for the plain holder of its lock file", "path", req.Path)
			}
			if abandoned, werr := waitLock(ctx, f, true); abandoned || werr != nil {
				if !abandoned {
					f.close()
					return nil, lockError(req.Path, werr)
				}
				h := holderAt(req.Path)
				return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(werr), Holder: h,
					Hint: "gave up while the lock itself was held exclusively, which keeps every slot out"}
			}
		}
		if err := f.identify(m.explicit); err != nil {
			f.release()
			return nil, err
		}
		if same, err := f.namedBy(req.Path); err == nil && !same {
			f.release()
			continue
		}
		return f, nil
	}
}

// errSlotAgain: the slot taken was on a file that lost its name; look at
// the slots again.
var errSlotAgain = errors.New("slot file replaced")

// takeSlot takes the first free slot (step 4): each in turn without
// waiting, then, when wait says so, the first that any of them grants.
func (p Protocol) takeSlot(ctx context.Context, req *lock.Request, m openMode, wait bool) (*handle, int, error) {
	n := req.Slots
	for {
		files := make([]*lockFile, 0, n)
		writable := make([]bool, 0, n)
		closeAll := func() {
			for _, f := range files {
				f.close()
			}
		}
		won := -1
		for k := 0; k < n; k++ {
			f, w, err := openSlotFile(SlotPath(req.Path, k), m, req.MakeDirs)
			if err != nil {
				closeAll()
				return nil, 0, err
			}
			busy, err := takeFree(f)
			if err != nil {
				f.close()
				closeAll()
				return nil, 0, lockError(SlotPath(req.Path, k), err)
			}
			files, writable = append(files, f), append(writable, w)
			if !busy {
				won = k
				break
			}
		}
		if won >= 0 {
			for _, f := range files[:won] {
				f.close()
			}
		} else {
			if !wait {
				closeAll()
				return nil, 0, slotsBusy(p, req.Path, "")
			}
			if req.Logger != nil {
				req.Logger.Debug("hold: waiting for a free slot", "path", req.Path, "slots", n)
			}
			k, err := waitAnySlot(ctx, files)
			if err != nil {
				if ctx.Err() != nil {
					return nil, 0, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(ctx.Err()),
						Hint: slotsHeldHint(p, req.Path)}
				}
				return nil, 0, lockError(req.Path, err)
			}
			won = k
		}
		h, err := p.slotOpened(ctx, req, won, files[won], writable[won])
		if errors.Is(err, errSlotAgain) {
			continue
		}
		return h, won, err
	}
}

// slotOpened makes the handle of slot k, whose file f this process has
// just locked, judged as any lock file is.
func (p Protocol) slotOpened(ctx context.Context, req *lock.Request, k int, f *lockFile, writable bool) (*handle, error) {
	sreq := *req
	sreq.Path = SlotPath(req.Path, k)
	sreq.Explicit, sreq.Slots, sreq.FenceAbove, sreq.BeforeCreate = false, 0, "", nil
	// The lock is held: lockOpened's own lock of it is granted at once.
	h, _, err := p.lockOpened(ctx, &sreq, f, writable, false, false)
	if err != nil && errors.Is(err, lock.ErrBusy) {
		// It was replaced and taken by someone else before the look again.
		return nil, errSlotAgain
	}
	return h, err
}

// tryFree bounds how long takeFree waits out shared locks of a slot
// that no one holds: each is an instant's, so only a process stopped in
// that instant (or a shared lock of the slot file taken by hand) makes
// it matter.
const tryFree = time.Second

// heldExclusively says whether someone holds the slot file f exclusively,
// that is, holds the slot: the kernel decides, by a non-blocking shared
// lock of it (let go at once).
func heldExclusively(f *lockFile) bool {
	if f.lock(true, false) != nil {
		return true
	}
	f.unlock()
	return false
}

// takeFree locks the slot file f exclusively without waiting for a
// holder: busy when someone holds the slot exclusively. Shared locks of
// the file are no holders (see the top of this file), so a slot that
// only they keep the lock from is tried again until they let go, for at
// most tryFree.
func takeFree(f *lockFile) (busy bool, err error) {
	var deadline time.Time
	pause := 20 * time.Microsecond
	for {
		err := f.lock(false, false)
		if err == nil {
			return false, nil
		}
		if !isBusy(err) {
			return false, err
		}
		if heldExclusively(f) {
			return true, nil
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(tryFree)
		} else if now.After(deadline) {
			return true, nil
		}
		time.Sleep(pause)
		pause = min(2*pause, 5*time.Millisecond)
	}
}

// waitAnySlot waits on every slot file at once and returns the index of the
// first one taken, which the caller then holds; every other file belongs
// from then on to its own wait, which closes it once its wait is granted
// (or fails). Each wait is for a shared lock, granted when the slot has no
// holder; it is let go at once, and the slot is then taken exclusively,
// or waited for again when someone else got there first. When ctx ends
// first, no slot is kept.
func waitAnySlot(ctx context.Context, files []*lockFile) (int, error) {
	type grant struct {
		k   int
		err error
	}
	granted := make(chan grant, len(files))
	var claimed atomic.Bool
	if ctx.Done() == nil {
		resched.BeforeBlocking()
	}
	for k, f := range files {
		go func() {
			for {
				err := f.lock(true, true)
				if err == nil {
					f.unlock()
					if claimed.Load() {
						f.close()
						return
					}
					var busy bool
					if busy, err = takeFree(f); err == nil && busy {
						continue
					}
				}
				if err == nil && claimed.CompareAndSwap(false, true) {
					granted <- grant{k, nil}
					return
				}
				if err == nil {
					f.unlock()
				}
				f.close()
				if err != nil {
					granted <- grant{k, err}
				}
				return
			}
		}()
	}
	failed := 0
	var first error
	for {
		select {
		case g := <-granted:
			if g.err == nil {
				return g.k, nil
			}
			if first == nil {
				first = g.err
			}
			if failed++; failed == len(files) {
				return -1, first
			}
		case <-ctx.Done():
			if claimed.CompareAndSwap(false, true) {
				return -1, ctx.Err()
			}
			// A slot was granted in that very instant: it is ours.
			for g := range granted {
				if g.err == nil {
					return g.k, nil
				}
			}
		}
	}
}

// slotHandle is one held slot: the slot's kernel lock (the embedded
// handle, whose record, token, loss and file are the slot file's) and the
// shared locks on the count file and the lock file.
type slotHandle struct {
	*handle
	slot        int
	count, gate *lockFile
	once        sync.Once
}

// Slot returns the place held, from 0 to N-1.
func (h *slotHandle) Slot() int { return h.slot }

// KeepingFiles returns the lock file and the count file, whose shared holds
// the slot needs beside the slot file's own lock (lock.FileKeeper): a
// command given only the slot file would, once its hold run died, hold a
// slot that a plain lock of the path no longer waits for.
func (h *slotHandle) KeepingFiles() []*os.File {
	return []*os.File{h.gate.file(), h.count.file()}
}

// Release lets go of the slot, then of the lock file and the count file.
// It is idempotent, as the slot's own Release is.
func (h *slotHandle) Release() error {
	err := h.handle.Release()
	h.once.Do(func() {
		h.gate.release()
		h.count.release()
	})
	return err
}

// InspectSlots reports the semaphore at path: the N its count file
// records, and who holds each slot (the kernel decides, by non-blocking
// probes: a slot is held while its file is locked exclusively, so a slot
// taken by hand with flock(1) counts as held, and a parked wait or
// someone's look, which lock it shared for an instant, do not). A path with
// no count file is no semaphore (yet): Slots is 0. When no slot is held
// and the lock file itself is held exclusively, that plain lock is
// reported, semaphore or not: it keeps every slot out. A look never locks
// a semaphore's file exclusively, not even for an instant: a try
// elsewhere would find it busy then.
func (p Protocol) InspectSlots(path string) (*lock.Status, error) {
	st := &lock.Status{Path: path, Protocol: "flock"}
	n, fence, err := readCountAt(CountPath(path))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if n == 0 {
		return exclusiveOr(path, st), nil
	}
	st.Slots, st.Fence = n, fence
	st.SlotHolders = make([]*lock.Holder, n)
	held := 0
	for k := range n {
		f, err := openForInspect(SlotPath(path, k))
		if err != nil {
			continue
		}
		if rec := readOwner(f); rec != nil && rec.Fence > st.Fence {
			st.Fence = rec.Fence
		}
		if h := slotHolder(f); h != nil {
			st.SlotHolders[k] = h
			if held++; held == 1 {
				st.Holder = h
			}
		}
		f.close()
	}
	if held > 0 {
		st.State = lock.HeldShared
		return st, nil
	}
	return exclusiveOr(path, st), nil
}

// exclusiveOr returns the status of the lock file at path when someone
// holds it exclusively, a plain holder that keeps every slot out, and st
// otherwise. Only that holder matters here, so only the shared probe asks
// (see probeExclusive).
func exclusiveOr(path string, st *lock.Status) *lock.Status {
	if plain, err := inspectLock(path, probeExclusive); err == nil && plain.State == lock.HeldExclusive {
		return plain
	}
	return st
}

// slotHolder says who holds the slot whose file f is, nil when no one
// holds it exclusively. The kernel is asked again after the record is
// read: a holder that let go meanwhile left its past record, which names
// no holder of now, and the slot is free.
func slotHolder(f *lockFile) *lock.Holder {
	var h *lock.Holder
	for range 3 {
		if !heldExclusively(f) {
			return nil
		}
		h = holderOf(f, true)
		if !heldExclusively(f) {
			return nil
		}
		if h.Owner == nil && len(h.PIDs) > 0 {
			// Named by the kernel's lock table alone, which lists
			// shared locks too: a parked wait's instant grant, between
			// a release and the next holder's lock, must not be taken
			// for the holder. Only pids a second look names again are.
			again := holderOf(f, true)
			h.PIDs = slices.DeleteFunc(h.PIDs, func(pid int) bool {
				gone := !slices.Contains(again.PIDs, pid)
				if gone {
					delete(h.Commands, pid)
				}
				return gone
			})
		}
		if h.Owner != nil || len(h.PIDs) > 0 {
			break
		}
		// Released and taken again between the looks: look once more
		// for the new holder's name.
	}
	return h
}

// slotsBusy is the error of a try that found every slot held: ErrBusy,
// the first holder, and every holder in the hint.
func slotsBusy(p Protocol, path, why string) error {
	e := &lock.Error{Op: "acquire", Path: path, Err: lock.ErrBusy}
	st, err := p.InspectSlots(path)
	if err == nil && st.Slots > 0 {
		e.Holder = st.Holder
		e.Hint = st.DescribeSlots()
	}
	if why != "" {
		if e.Hint != "" {
			e.Hint = why + "; " + e.Hint
		} else {
			e.Hint = why
		}
	}
	return e
}

// slotsHeldHint describes the slots for the error of a wait that ended.
func slotsHeldHint(p Protocol, path string) string {
	if st, err := p.InspectSlots(path); err == nil && st.Slots > 0 {
		return "gave up while " + st.DescribeSlots()
	}
	return "gave up while every slot was held"
}
