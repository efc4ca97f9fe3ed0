package dirlock

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hold-dev/hold/lock"
)

// handle is one held lock directory. Its heartbeat refreshes the
// directory's mtime and checks, on every beat, that the path is still our
// directory with our stamp; when it is not, the lock is lost: the Lost
// channel closes and Check and Release report ErrLost. A compromise is
// reported, never swallowed.
//
// The heartbeat is a timer (time.AfterFunc), not a goroutine per lock: a
// lock held for less than one beat then costs no goroutine at all, and
// Release does not wait for one to wind down (handing a goroutine to
// another thread and back can cost most of an uncontended acquire and
// release under load). A beat
// and Release exclude each other through mu, so no beat touches the
// directory once Release has begun.
type handle struct {
	p     *Protocol
	path  string
	owner lock.Owner
	stamp []byte // the owner record exactly as written
	dir   *dirRef
	lost  lock.LostState
	// stale is the stale time others judge this lock by (the request's,
	// else the protocol's); stopWithin is the request's StopWithin;
	// heartbeat and lossAfter are what the two make of the configuration
	// (see expiry.go).
	stale, stopWithin, heartbeat, lossAfter time.Duration
	lastOK                                  atomic.Int64 // UnixNano of the last heartbeat written
	done                                    atomic.Bool  // released: the expiry timer does nothing

	mu       sync.Mutex
	timer    *time.Timer
	expiry   *time.Timer // fires the loss at lossAfter; armed at the first beat
	beats    int         // heartbeats run, for tests
	released bool
	// leaveGate gives up the place at the waiting gate this holder kept
	// (idempotent; a no-op when the acquisition was ungated).
	leaveGate func()
	// slot is the semaphore slot this handle holds (semaphore.go), -1
	// for a plain lock.
	slot int
	// carry is the token a file-form holder hands on (attempt.carry).
	carry uint64
	// touchedWant is, under Request.LostIfTouched, the time stamp the
	// directory had after this holder last set it; nil otherwise.
	touchedWant *time.Time
}

// goneWhy says how the lock was lost when its path no longer holds what
// this holder made: the directory, or in the file form (SoftFile) the
// file, was removed or replaced.
func (h *handle) goneWhy() string {
	if h.dir != nil && h.dir.file {
		return "the lock file was removed or replaced (a file-form lock, hold.SoftFile or soft_file)"
	}
	return "the lock directory was removed or replaced"
}

func (p *Protocol) newHandle(path string, owner lock.Owner, stamp []byte, d *dirRef, leaveGate func(), stale, stopWithin, heartbeat time.Duration, lostIfTouched bool) *handle {
	if leaveGate == nil {
		leaveGate = func() {}
	}
	stale = max(stale, p.cfg.Grace)
	h := &handle{p: p, path: path, owner: owner, stamp: stamp, dir: d, leaveGate: leaveGate, stale: stale, slot: -1,
		stopWithin: stopWithin, heartbeat: p.cfg.beatFor(stale, stopWithin), lossAfter: p.cfg.lossAfter(stale, stopWithin)}
	if heartbeat > 0 {
		h.heartbeat = p.cfg.beatAsked(heartbeat, stale, stopWithin)
	}
	if lostIfTouched && !d.file {
		// The time stamp the directory was made with, which the first
		// heartbeat must find unchanged.
		if t, err := d.mtime(); err == nil {
			h.touchedWant = &t
		}
	}
	// The directory's mtime was set when it was made, a moment ago:
	// counting from now errs by that moment, which the margin covers.
	h.lastOK.Store(time.Now().UnixNano())
	p.setActive(owner.ID, true)
	h.mu.Lock()
	h.timer = time.AfterFunc(h.heartbeat, h.beat)
	h.mu.Unlock()
	return h
}

// Fence returns 0 on a path only this protocol uses: a lock directory is
// deleted on release, so there is nowhere for a counter to outlive its
// holders, and a clock is not a fencing token. Use the kernel or etcd
// protocol when the resource needs one. On a path another protocol
// released, it continues that protocol's token (see released.go).
func (h *handle) Fence() uint64 { return h.owner.Fence }

func (h *handle) Owner() *lock.Owner { o := h.owner; return &o }

func (h *handle) Lost() <-chan struct{} { return h.lost.Lost() }

// beat is one heartbeat. A beat that finds the lock gone or replaced marks
// it lost and stops. A beat that cannot refresh the mtime (or cannot even
// look) keeps trying, and marks the lock lost once nothing succeeded for
// lossAfter: soon after, a reader judging by age may legitimately take
// it, and the holder must have stopped by then (see expiry.go).
func (h *handle) beat() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released || h.lost.Marked() {
		return
	}
	h.beats++
	h.armExpiry()
	now := time.Now()
	switch check(h.path, h.dir, h.stamp) {
	case notOurs:
		h.markLostLocked(h.goneWhy())
		return
	case ours, inconclusive:
		if h.touched() {
			h.markLostLocked("the lock directory's time stamp was changed by someone else, which proper-lockfile's holders read as the lock taken by another process")
			return
		}
		if err := h.dir.refresh(now); err == nil {
			h.refreshed(now)
			h.noteTouch()
		}
	}
	if h.overdue(time.Now()) {
		return
	}
	h.timer.Reset(h.heartbeat)
}

// touched reports, under Request.LostIfTouched, whether the directory's
// time stamp is no longer the one this holder last set: someone else set
// it. A time stamp that cannot be read proves nothing (the ownership
// check has just passed); the next beat looks again.
func (h *handle) touched() bool {
	if h.touchedWant == nil {
		return false
	}
	t, err := h.dir.mtime()
	return err == nil && !t.Equal(*h.touchedWant)
}

// noteTouch remembers, under Request.LostIfTouched, the time stamp the
// refresh just set, as the filesystem keeps it (which may be coarser than
// the clock's).
func (h *handle) noteTouch() {
	if h.touchedWant == nil {
		return
	}
	if t, err := h.dir.mtime(); err == nil {
		*h.touchedWant = t
	}
}

func (h *handle) markLost(why string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.markLostLocked(why)
}

// markLostLocked marks the lock lost, and gives up the place at the gate
// the first time, since a lost lock frees the way for the next waiter.
func (h *handle) markLostLocked(why string) {
	if h.lost.MarkLost(why) {
		h.leaveGate()
	}
}

func (h *handle) lostError(op string) error { return h.lost.Err(op, h.path) }

// Check looks at the lock now, not only at what the last heartbeat saw, so
// a caller about to publish (Update) never relies on a beat that has not
// run yet.
func (h *handle) Check() error {
	// Lost first, without h.mu: a heartbeat stuck in a hung filesystem
	// holds it, and its holder must still hear of the loss at once.
	if err := h.lostError("check"); err != nil {
		return err
	}
	h.mu.Lock()
	released := h.released
	h.mu.Unlock()
	if released {
		return &lock.Error{Op: "check", Path: h.path, Err: lock.ErrReleased}
	}
	if h.overdue(time.Now()) {
		// The heartbeats have failed too long (the expiry timer may not
		// have run yet): see expiry.go.
		return h.lostError("check")
	}
	if check(h.path, h.dir, h.stamp) == notOurs {
		h.markLost(h.goneWhy())
		return h.lostError("check")
	}
	return nil
}

// Release removes the lock only if it is still ours by identity and token;
// a lock that was reclaimed and recreated by someone else is left to them
// and reported as ErrLost. Idempotent: later calls return nil, or ErrLost
// again if the lock had been lost.
func (h *handle) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return h.lostError("release")
	}
	h.released = true
	h.done.Store(true)
	h.timer.Stop()
	if h.expiry != nil {
		h.expiry.Stop()
	}
	defer h.leaveGate()
	defer h.dir.close()
	defer h.p.setActive(h.owner.ID, false)

	if err := h.lostError("release"); err != nil {
		return err
	}
	// Identity first, with one stat: while our descriptor is open (unix)
	// the inode number cannot have been reused, so a path that is not our
	// directory is proof the lock was lost. The record is checked on what
	// removeIfSame moves aside: a lock that is not ours is put back.
	if fi, err := lstat(h.path); err == nil && !os.SameFile(fi, h.dir.identity()) || errors.Is(err, os.ErrNotExist) {
		h.markLostLocked(h.goneWhy())
		return h.lostError("release")
	}
	h.p.hit(faultReleaseVerified)
	res, err := removeIfSame(h.path, h.dir.identity(), expect{stamp: h.stamp}, func() {
		h.p.hit(faultReleaseMoved)
	}, func() {
		// What was moved is our own lock: the lock is free from here on.
		// Leave the past record, wake the next local waiter and let it
		// run first. (Not before: had someone else's lock replaced ours,
		// a past record at the path would keep it from being put back.)
		h.leavePastRecord()
		h.leaveGate()
		yieldCPU()
	})
	switch res {
	case removed:
		if err != nil {
			// The lock is free; only the tomb's cleanup failed.
			return &lock.Error{Op: "release", Path: h.path, Err: err, Hint: "the lock was released; a leftover could not be removed"}
		}
		return nil
	case changed:
		h.markLostLocked(h.goneWhy())
		return h.lostError("release")
	}
	if isRemoveContention(err) {
		// Windows: another process is inside the directory. Ownership was
		// verified, so the caller's work stands; the directory ages out
		// (our pid with no handle is judged by age).
		return nil
	}
	if err == nil {
		err = errors.New("lock directory could not be removed")
	}
	return &lock.Error{Op: "release", Path: h.path, Err: err}
}
