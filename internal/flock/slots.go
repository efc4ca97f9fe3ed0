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
//	P          the gate: every slot holder holds it shared, so that a plain
//	           (exclusive) lock of P and the slots exclude each other
//	P.slots    the count file, "N TOKEN": the N in use and the last fencing
//	           token of any slot; locked exclusively, for an instant, by
//	           whoever reads and rewrites it, and by no one else
//	P.slotK    slot K, for K from 0 to N-1, held exclusively by its holder,
//	           which writes its owner record there as into a lock file
//
// plus the queue of waiters, fairq's queue of the path P.slots
// ("P.slots.queue" on Linux, the directory "P.slots.q" elsewhere).
//
// A shell user takes slot 3 by hand as `flock -s P flock P.slot3 cmd`
// (the outer shared lock keeps a plain holder of P out, as a slot holder
// of hold's does); hold counts such a slot as held, and N cannot change
// while it is (setCount looks at every slot file).
//
// An acquisition (acquireSlot):
//
//  1. Joins the queue and waits until every waiter that came earlier has
//     left it, so that waiters are served in arrival order and only the
//     first in line looks at the slots. The queue is for fairness only:
//     its stall rule lets a waiter pass a first waiter that keeps its
//     place while a slot stays free (one stopped with Ctrl-Z), so no
//     guarantee below may rest on it. A try does not wait in it.
//  2. Locks P shared (lockGate): a plain holder of P is waited for.
//  3. Checks N (checkCount), under the count file's exclusive lock: the N
//     recorded is the one asked for, or no slot file is held exclusively
//     (by hold or by hand), and N is rewritten (setCount). Otherwise it is
//     ErrSlotCount. A count file that records nothing while slots are held
//     was removed under them: their holders are told they lost the
//     semaphore (the loss watch), and the acquisition waits until they let
//     go.
//  4. Takes a free slot (takeSlot): each in turn without waiting, and
//     when all are busy it waits on all of them at once, one blocked
//     flock(2) per slot on a goroutine of its own, and keeps the first
//     slot it takes. These waits ask for a shared lock of the slot file,
//     which the kernel grants the moment no one holds the slot (its
//     holder released it or died): nothing polls. A granted wait lets go
//     at once and takes the slot exclusively without waiting, or waits
//     again when someone else took it first. (A blocked flock(2) cannot
//     be called off, so the waits on the other slots stay parked, one
//     thread each, until their slot is next released; they then let go
//     at once.)
//  5. Hands out the token (assignToken), under the count file's exclusive
//     lock again, now that the slot is held: if N changed since step 3 the
//     slot is let go and the acquisition starts again; otherwise the token
//     is one above the count file's, the gate's record's (the last plain
//     holder's) and the slot's own last one, and is written into the
//     slot's record and the count file before the lock is let go.
//
// The token. A target has one sequence of tokens, whatever its holders
// ask for: plain, shared, slots, any N. It is read and advanced only
// while an exclusive kernel lock keeps every other writer of it out: a
// plain holder's, in publishLocked, under its exclusive lock of P (no slot
// holder can exist then: they all hold P shared), from P's record and the
// count file; a slot's here, under the count file's exclusive lock, held
// while the slot and P are. Never from a value read before a wait: that
// is how two holders once got one token (a waiter read the count file,
// was stopped, and was passed by the queue's stall rule).
//
// Release lets go of the slot, then of P. A crash at any step frees
// everything at once: all of it is kernel locks. The files are watched
// (see watch.go): when P, the count file or the slot file is removed or
// replaced, the holder is told it lost the semaphore; and a plain holder
// that finds slots held beside its lock of P (P was replaced under them)
// waits for them instead of holding beside them (orphanedSlots).
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
		// A try does not wait behind the queue: it takes a slot that is
		// free now, or is busy. (The queue orders waiters; it guards
		// nothing.)
		leave, err = func() {}, nil
	}
	if err != nil {
		return nil, err
	}
	defer leave()
	m := openMode{beforeCreate: req.BeforeCreate, perm: uint32(req.Mode.Perm())}
	gm := m
	gm.explicit = req.Explicit
	for attempt := 0; ; attempt++ {
		gate, err := lockGate(ctx, req, gm, wait)
		if err != nil {
			return nil, err
		}
		count, err := checkCount(ctx, req, m, wait)
		if err != nil {
			gate.release()
			return nil, err
		}
		h, k, err := p.takeSlot(ctx, req, m, wait)
		if err != nil {
			count.close()
			gate.release()
			return nil, err
		}
		if err = assignToken(ctx, req, count, gate, h, wait); err != nil {
			h.Release()
			count.close()
			gate.release()
			if errors.Is(err, errCountChanged) {
				if attempt < 3 {
					continue
				}
				return nil, slotCountError(req.Path, 0, n)
			}
			return nil, err
		}
		h.mu.Lock()
		// The slot's loss is the semaphore's: its gate and count file
		// are watched with the slot file (see handle.Check).
		h.also = []keptFile{{gate, req.Path}, {count, CountPath(req.Path)}}
		h.mu.Unlock()
		if req.Logger != nil {
			req.Logger.Debug("hold: acquired slot", "path", req.Path, "slot", k, "slots", n)
		}
		return &slotHandle{handle: h, slot: k, count: count, gate: gate}, nil
	}
}

// errCountChanged: N was rewritten between checkCount and assignToken, by
// an acquisition with another N that found no slot held in between.
var errCountChanged = errors.New("semaphore count changed")

// countPoll is how often an acquisition looks again while the count file
// records no N but slots are held (it was removed under them): their
// holders are told of the loss within the loss watch's period, and let go.
const countPoll = 50 * time.Millisecond

// lockCountFile opens the count file and locks it exclusively, for the
// instant of a read and a rewrite (steps 3 and 5). A count file renamed
// over or removed between the open and the lock is opened again.
func lockCountFile(ctx context.Context, req *lock.Request, m openMode, wait bool) (*lockFile, error) {
	path := CountPath(req.Path)
	for {
		f, writable, err := openSlotFile(path, m, req.MakeDirs)
		if err != nil {
			return nil, err
		}
		if !writable {
			f.close()
			return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: fs.ErrPermission,
				Hint: "this user may not write the semaphore's count file " + path + ", which every slot holder rewrites with its token: give every user of the semaphore write access to it (and to the lock file and the slot files), or run as its owner"}
		}
		if err := lockCountNow(ctx, f, wait); err != nil {
			return nil, countLockError(req.Path, err, ctx)
		}
		if err := f.identify(false); err != nil {
			f.release()
			return nil, err
		}
		if same, err := f.namedBy(path); err == nil && !same {
			f.release()
			continue
		}
		return f, nil
	}
}

// lockCountNow takes the count file's exclusive lock. Only instants hold
// it, so a wait is short; a try waits for at most tryFree. On an error
// f is closed.
func lockCountNow(ctx context.Context, f *lockFile, wait bool) error {
	if !wait {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, tryFree)
		defer cancel()
	}
	return lockFor(ctx, f, false, true)
}

// checkCount is step 3: under the count file's exclusive lock, the N
// recorded is req.Slots, or it is rewritten (setCount). It returns the
// count file, unlocked and open: assignToken locks it again, and the
// hold keeps it open so that the loss watch can tell when it is removed
// or replaced.
func checkCount(ctx context.Context, req *lock.Request, m openMode, wait bool) (*lockFile, error) {
	n := req.Slots
	for {
		f, err := lockCountFile(ctx, req, m, wait)
		if err != nil {
			return nil, err
		}
		inUse, fence, err := readCount(f)
		if err != nil {
			f.release()
			return nil, &lock.Error{Op: "acquire", Path: CountPath(req.Path), Err: err}
		}
		if inUse == n {
			f.unlock()
			return f, nil
		}
		held, err := setCount(req.Path, f, inUse, n, fence)
		f.unlock()
		if err != nil {
			f.close()
			return nil, err
		}
		if held == nil {
			return f, nil
		}
		f.close()
		if inUse > 0 {
			return nil, slotCountError(req.Path, inUse, n)
		}
		// No N recorded, yet a slot is held: the count file was removed
		// or replaced under its holders, who are being told. N and the
		// token are known again once they have let go.
		if !wait {
			return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrBusy, Holder: held,
				Hint: "the semaphore's count file " + CountPath(req.Path) + " was removed or replaced while slots were held; their holders are told they lost the semaphore, and it can be taken again once they let go"}
		}
		select {
		case <-ctx.Done():
			return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(ctx.Err()), Holder: held,
				Hint: "gave up while slots were held under a count file that was removed or replaced"}
		case <-time.After(countPoll):
		}
	}
}

// setCount rewrites the N of the count file f, locked exclusively, to n,
// unless a slot file is held exclusively (by hold or by hand): then it
// returns that slot's holder and changes nothing. Every slot file there
// is is looked at, not only the first max(inUse, n): a hand-taken slot of
// another N holds one too. The token recorded is the largest of the
// count file's, the gate's and every slot's, so that a count file made
// anew (removed while no one held a slot) does not start the tokens
// again.
func setCount(path string, f *lockFile, inUse, n int, fence uint64) (*lock.Holder, error) {
	slotsFence, held := scanSlots(path, max(inUse, n))
	if held != nil {
		return held, nil
	}
	if err := writeCount(f, n, max(fence, fenceAt(path), slotsFence)); err != nil {
		return nil, &lock.Error{Op: "acquire", Path: CountPath(path), Err: err,
			Hint: "the semaphore's count file could not be written"}
	}
	return nil, nil
}

// scanSlots looks at every slot file of the semaphore at path: those
// below below, and any after them up to the first missing one. It returns
// the largest token their records keep and the holder of the first slot
// held exclusively (nil when none is). setCount, orphanedSlots and
// slotsFence all ask it, so that what counts as a slot file is decided
// once.
func scanSlots(path string, below int) (fence uint64, held *lock.Holder) {
	for k := 0; k < maxSlotScan; k++ {
		f, err := openForInspect(SlotPath(path, k))
		if err != nil {
			if k >= below {
				break
			}
			continue
		}
		fence = max(fence, fenceIn(f))
		if held == nil && heldExclusively(f) {
			held = holderOf(f, false)
		}
		f.close()
	}
	return fence, held
}

// orphanedSlots returns the holder of a slot of the semaphore at path,
// nil when no slot is held (or there is no semaphore). A plain holder asks
// with the lock file held exclusively: every slot holder of hold's holds
// that file shared, so a slot held now is held under a lock file that has
// since been removed or replaced, and the plain holder must not hold
// beside it.
func orphanedSlots(path string) *lock.Holder {
	n, _, err := readCountAt(CountPath(path))
	if err != nil {
		return nil
	}
	_, held := scanSlots(path, n)
	return held
}

// gateBusy is the busy error of a plain try of the lock file at path
// while slots of its semaphore are held, naming the slot holders, and nil
// when none is held. The kernel's list of the lock file's shared holders
// would name the semaphore's waiters too, who hold it shared while they
// wait for a slot, and hold nothing a user would call the lock.
func gateBusy(path string) error {
	st, err := Protocol{}.InspectSlots(path)
	if err != nil || st.Slots == 0 || st.State != lock.HeldShared || st.Holder == nil {
		return nil
	}
	return &lock.Error{Op: "acquire", Path: path, Err: lock.ErrBusy, Holder: st.Holder,
		Hint: "a plain lock waits until no slot of its semaphore is held, and " + st.DescribeSlots()}
}

// errOrphaned is the error of a plain lock of a file that replaced the
// gate of a semaphore whose slots are still held (see orphanedSlots).
var errOrphaned = errors.New("slots of the semaphore are held under a replaced lock file")

// orphanError is errOrphaned as a busy lock held by the slot's holder.
func orphanError(path string, held *lock.Holder) error {
	return &lock.Error{Op: "acquire", Path: path, Err: fmt.Errorf("%w: %w", lock.ErrBusy, errOrphaned), Holder: held,
		Hint: "the lock file was removed or replaced while slots of its semaphore were held; their holders are told they lost the semaphore, and the lock is free once they let go"}
}

// errHolder returns the holder an error names, nil if none.
func errHolder(err error) *lock.Holder {
	var e *lock.Error
	if errors.As(err, &e) {
		return e.Holder
	}
	return nil
}

// slotsFence returns the largest token recorded in the slot files of the
// semaphore at path, 0 when it has none (for a lock that was never a
// semaphore, one failed open).
func slotsFence(path string) uint64 {
	fence, _ := scanSlots(path, 0)
	return fence
}

// maxSlotScan bounds the slot files scanSlots looks at.
const maxSlotScan = 4096

// fenceIn returns the last token recorded in the lock file f: the record's
// fence, 0 when there is none.
func fenceIn(f *lockFile) uint64 {
	var buf [readSize]byte
	if _, raw, err := readRecord(f, buf[:]); err == nil {
		if fence, ok := lock.DecodeFence(raw); ok {
			return fence
		}
	}
	return 0
}

// assignToken is step 5: with the slot h held, and the gate, it locks the
// count file exclusively, makes sure N is still req.Slots (errCountChanged
// otherwise), and hands the slot the next token of the target: one above
// the count file's, the gate's record's and the slot's own (publishLocked),
// all read now, under this lock. The token is recorded in the count file
// before the lock is let go.
func assignToken(ctx context.Context, req *lock.Request, count, gate *lockFile, h *handle, wait bool) error {
	if err := lockCountNow(ctx, count, wait); err != nil {
		return countLockError(req.Path, err, ctx)
	}
	defer count.unlock()
	if same, err := count.namedBy(CountPath(req.Path)); err == nil && !same {
		return errCountChanged
	}
	if same, err := gate.namedBy(req.Path); err == nil && !same {
		// The gate was replaced since it was locked: a plain holder of
		// the new one may hold now (it waits for held slots only once it
		// holds it). Let go and take the new one.
		return errCountChanged
	}
	inUse, fence, err := readCount(count)
	if err != nil {
		return &lock.Error{Op: "acquire", Path: CountPath(req.Path), Err: err}
	}
	if inUse != req.Slots {
		return errCountChanged
	}
	h.mu.Lock()
	h.fenceFloor = max(fence, fenceIn(gate))
	h.publishLocked()
	token := h.owner.Fence
	h.mu.Unlock()
	if token > fence {
		if err := writeCount(count, inUse, token); err != nil {
			return &lock.Error{Op: "acquire", Path: CountPath(req.Path), Err: err,
				Hint: "the semaphore's count file could not be written"}
		}
	}
	return nil
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
	if h != nil {
		h.slotFile = true
	}
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
// handle, whose record, token and file are the slot file's, and whose
// loss is any of the semaphore's files'), the shared lock on the lock
// file, and the count file, open so that the loss watch can look at it.
type slotHandle struct {
	*handle
	slot        int
	count, gate *lockFile
	once        sync.Once
}

// Slot returns the place held, from 0 to N-1.
func (h *slotHandle) Slot() int { return h.slot }

// KeepingFiles returns the lock file, whose shared hold the slot needs
// beside the slot file's own lock (lock.FileKeeper): a command given only
// the slot file would, once its hold run died, hold a slot that a plain
// lock of the path no longer waits for.
func (h *slotHandle) KeepingFiles() []*os.File {
	return []*os.File{h.gate.file()}
}

// Release lets go of the slot, then of the lock file, and closes the
// count file. It is idempotent, as the slot's own Release is.
func (h *slotHandle) Release() error {
	err := h.handle.Release()
	h.once.Do(func() {
		h.gate.release()
		h.count.close()
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
