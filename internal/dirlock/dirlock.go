// Package dirlock is hold's portable protocol: the directory lock of
// career-ops' dir-lock and npm's proper-lockfile, with their hard-won rules
// kept and their races closed, for filesystems where kernel locks are
// missing or only local (some NFS, FUSE and SMB mounts) and for sharing a
// lock with Node tools.
//
// On disk: "mkdir <lock path>" is the atomic step. Inside, owner.json,
// created exclusively, records pid, token and started_at (career-ops'
// names) plus host, the process start time and the command. While held,
// the holder refreshes the directory's mtime every Heartbeat, which is what
// proper-lockfile's waiters read; a lock without owner.json (what
// proper-lockfile makes) is judged by that mtime.
//
// Staleness (judge): an owner alive on this host is never stale, however
// old; a dead one (pid gone, or reused: checked with the start time) is
// stale at once; anything that cannot be checked (no record, a corrupt
// one, another host, a leftover of this very process) is stale when its
// heartbeat is older than Stale, never younger than Grace. An owner record
// that exists but cannot be read pins the lock live: unreadable is not
// missing. A plain file at the lock path is the kernel protocol's lock
// file: live while a kernel lock is held on it, whatever its age (a kernel
// holder never refreshes anything); otherwise free at once when it holds a
// released record or a gone holder's, and else, empty or holding a record,
// a leftover judged by age (judgeFile); one holding Python filelock's soft
// lock record is judged by its holder, as filelock judges it
// (judgeFilelock). It is removed only while holding its kernel lock
// (reclaimFile). Anything else there is not a lock at all
// (content.go): an error at once, never a wait or a delete.
//
// Reclaim is serialized behind a guard directory "<lock path>.recover"
// (itself cleared once older than Grace) and deletes a lock only if what
// it moves aside is the very directory, with the very owner token, that it
// judged (removeIfSame). After winning, the holder reads its stamp back.
// Release removes the lock only when token and identity prove it is still
// its own, and never registers exit-time removal. A heartbeat that finds
// the lock removed or replaced reports it lost.
//
// A request may ask for the file form instead (lock.Request's SoftFile,
// softfile.go): the lock is then a plain file at the lock path, created
// with O_EXCL, holding Python filelock's SoftFileLock record of this
// process, which filelock's SoftFileLock waits for (it cannot wait for a
// directory). Only the claim step differs; it is judged, reclaimed, watched
// and released by the rules above for a filelock soft lock's file.
//
// There is one acquire loop (Protocol.loop), for a plain lock and for a
// semaphore's slots (semaphore.go); Acquire and TryAcquire differ only in
// what they do with a busy pass.
package dirlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// GuardSuffix names the reclaim guard: "<lock path>.recover", as in
// career-ops' dir-lock, so the two serialize their reclaims together.
const GuardSuffix = ".recover"

// Fault points: the steps at which tests kill the process (see
// Protocol.fault). Named here so tests and code agree.
const (
	faultAfterMkdir      = "acquire.mkdir"    // lock directory made, no stamp yet
	faultAfterStamp      = "acquire.stamp"    // stamped, not yet read back
	faultAfterReadBack   = "acquire.readback" // confirmed, handle not yet returned
	faultInGuard         = "reclaim.guard"    // guard taken, nothing judged yet
	faultJudged          = "reclaim.judged"   // lock judged stale, not yet moved
	faultFileLocked      = "reclaim.locked"   // a plain file's kernel lock taken for its removal, not yet moved
	faultReclaimMoved    = "reclaim.moved"    // stale lock moved to its tomb, tomb not yet deleted
	faultGuardJudged     = "guard.judged"     // an old guard judged, not yet evicted
	faultReleaseVerified = "release.verified" // ownership verified, lock not yet moved
	faultReleaseMoved    = "release.moved"    // lock moved to its tomb, tomb not yet deleted
	faultGateHeld        = "gate.held"        // waiting gate taken, no pass made yet
	faultSlotsScanned    = "slots.scanned"    // a semaphore's slots of other counts looked for, none taken yet
)

// Protocol implements lock.Protocol, lock.Breaker and lock.Describer with lock directories.
// Create it with New and reuse it: it remembers the tokens of the handles it
// has given out, which is how it tells a lock this process holds from a
// leftover of this process that nobody holds. It is safe for concurrent use.
type Protocol struct {
	cfg Config

	mu     sync.Mutex
	active map[string]struct{}

	// watches serves every waiter of this Protocol with one source of
	// directory events (see watchRemovals).
	watches watchHub
	// blocks keeps an inotify instance for waiters that sleep in blocking
	// system calls (see blockingWatch).
	blocks blockPool

	// fault, when set (by tests only), is called at each fault point.
	fault func(point string)
}

// New returns the protocol with cfg's knobs, unset ones taken from the
// HOLD_DIR_* environment variables or the defaults (see Config.Resolve).
func New(cfg Config) *Protocol {
	return &Protocol{cfg: cfg.Resolve(nil), active: make(map[string]struct{})}
}

// Config returns the resolved knobs in force.
func (p *Protocol) Config() Config { return p.cfg }

// Name returns "dir".
func (p *Protocol) Name() string { return "dir" }

func (p *Protocol) hit(point string) {
	if p.fault != nil {
		p.fault(point)
	}
}

func (p *Protocol) isActive(token string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.active[token]
	return ok
}

func (p *Protocol) setActive(token string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.active[token] = struct{}{}
	} else {
		delete(p.active, token)
	}
}

// Acquire waits until the lock is held, ctx ends, or the Patience/Ceiling
// rule gives up (see Config). Every error is an *lock.Error naming the
// holder; a wait that ends matches lock.ErrTimeout (or context.Canceled).
func (p *Protocol) Acquire(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(err)}
	}
	return p.acquire(ctx, req, true)
}

// TryAcquire takes the lock if it can be had now. It is the same pass
// Acquire makes, so a stale lock is reclaimed in line; only a live holder
// (or a reclaim in progress) answers ErrBusy.
func (p *Protocol) TryAcquire(req *lock.Request) (lock.Handle, error) {
	return p.acquire(context.Background(), req, false)
}

// outcome is what one pass of the protocol ended in.
type outcome int

const (
	// passHeld: the lock is ours, stamped and confirmed.
	passHeld outcome = iota
	// passAgain: something moved under us (a stale lock was reclaimed, the
	// lock vanished, or a lock we made was taken before we confirmed it):
	// try again at once.
	passAgain
	// passBusy: someone else holds it, or a reclaim is in progress.
	passBusy
	// passFailed: an error waiting cannot cure.
	passFailed
)

// maxImmediate bounds passes in a row that end in passAgain before the
// loop sleeps anyway (and before TryAcquire answers busy): each such pass
// is progress, but a loop must never spin on a path that keeps changing.
const maxImmediate = 3

// attempt is the state of one acquisition across its passes.
type attempt struct {
	p      *Protocol
	path   string
	guard  string
	owner  lock.Owner
	logger func(msg string, args ...any)
	// stopWithin is the request's StopWithin (see expiry.go).
	stopWithin time.Duration
	// heartbeat and lostIfTouched are the request's (see beatAsked and
	// handle.touched).
	heartbeat     time.Duration
	lostIfTouched bool
	lastErr       error     // last mkdir error treated as contention, if not EEXIST
	seen          judgement // the last judgement of a busy lock
	// reclaimed is set once this acquisition removed a stale lock.
	reclaimed bool
	// leaveGate gives up this acquisition's place at the gate (nil when
	// ungated); the handle takes it over when the lock is won.
	leaveGate func()
	// stale is this acquisition's stale time: the request's, else the
	// protocol's. It judges the holders it meets, and its own handle
	// beats often enough for others judging by it.
	stale time.Duration
	// nextFence, when set (a semaphore's slot), draws the token of a
	// lock this pass has just made, before it is stamped: a semaphore's
	// slots share one rising sequence (semaphore.go).
	nextFence func() uint64
	// slot is the slot this attempt takes, -1 for a plain lock.
	slot int
	// soft: the file form (lock.Request.SoftFile, softfile.go): the
	// claim creates a plain file holding filelock's record instead of
	// making a directory.
	soft bool
	// carry is the token of a released record this file-form attempt
	// reclaimed: its record has no room for a token, so it hands this one
	// on, unchanged, when it lets go (leavePastRecord).
	carry uint64
	// mode is the file form's lock file's permission bits.
	mode os.FileMode
}

// newAttempt prepares the acquisition of the lock at path for req: the
// owner record to stamp and the stale time to judge by. A semaphore's
// slots (semaphore.go) are such attempts too, one per slot path.
func (p *Protocol) newAttempt(req *lock.Request, path string) (*attempt, error) {
	a := &attempt{p: p, path: path, guard: path + GuardSuffix, owner: req.Owner, stopWithin: req.StopWithin, stale: p.cfg.Stale, slot: -1, soft: req.SoftFile}
	a.heartbeat, a.lostIfTouched = req.Heartbeat, req.LostIfTouched
	if req.Stale > 0 {
		a.stale = req.Stale
	}
	if err := p.cfg.checkStopWithin(req.Path, a.stale, req.StopWithin); err != nil {
		return nil, err
	}
	if a.owner.ID == "" {
		a.owner.ID = lock.NewID()
	}
	a.owner.Protocol = "dir"
	// Where the pid lives: a waiter in another pid namespace or boot
	// (a container that shares the host's name) must not judge it.
	a.owner.PIDNS, a.owner.BootID = proc.Where()
	a.owner.Shared = false
	a.owner.Fence = 0
	// filelock's default, which leaves the record writable by its owner
	// only; a mode asked for keeps that rule.
	a.mode = 0o644
	if req.Mode != 0 {
		a.mode = req.Mode.Perm() &^ 0o022
	}
	a.logger = func(string, ...any) {}
	if req.Logger != nil {
		a.logger = func(msg string, args ...any) { req.Logger.Debug(msg, append([]any{"path", req.Path}, args...)...) }
	}
	return a, nil
}

// acquire is the protocol's one acquire loop.
func (p *Protocol) acquire(ctx context.Context, req *lock.Request, wait bool) (lock.Handle, error) {
	// The heartbeat and the waits arm timers; see proc.ReadyForLock.
	if err := proc.ReadyForLock("acquire", req.Path); err != nil {
		return nil, err
	}
	if req.Shared {
		return nil, lock.ExclusiveOnly("acquire", req.Path, "portable")
	}
	h, err := p.acquirePlain(ctx, req, wait)
	if errors.Is(err, errSemaphoreHere) && !req.SoftFile {
		// A semaphore is at the lock path: a plain lock there is its one
		// slot of a semaphore of one (semaphore.go).
		return p.acquireSlots(ctx, req, 1, wait)
	}
	return h, err
}

// acquirePlain is acquire on a lock path that holds no semaphore; it
// fails with an error matching errSemaphoreHere on one that does.
func (p *Protocol) acquirePlain(ctx context.Context, req *lock.Request, wait bool) (lock.Handle, error) {
	a, err := p.newAttempt(req, req.Path)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	pol := newPolicy(req.Path, p.cfg, start)
	if !p.cfg.Ungated {
		// The waiting gate (see GateSuffix): among this machine's waiters
		// only the one at its front runs the loop below. A winner keeps
		// its place until it lets go of the lock (its handle takes
		// leaveGate over); an acquisition that fails gives it up at once.
		var leave func()
		if wait {
			busy := true
			if req.Watch != nil {
				// A watched wait (lock.Request.Watch) tries the gate
				// first: only one with a waiter ahead, or the holder,
				// keeping it is a wait to tell the watcher of.
				if leave, busy = a.tryGate(); busy {
					ctx = req.Watch.Waiting(ctx)
				}
			}
			if busy {
				var err error
				if leave, err = a.enterGate(ctx, pol); err != nil {
					return nil, err
				}
			}
		} else {
			var busy bool
			if leave, busy = a.tryGate(); busy {
				// Another local waiter is ahead: the lock is busy, and its
				// holder is whoever has the directory.
				a.seen = p.judgeAfter(a.path, a.stale)
				switch a.seen.verdict {
				case foreign:
					return nil, foreignError("acquire", a.path, a.seen.why)
				case failed:
					return nil, failedError("acquire", a.path, a.seen)
				}
				return nil, a.busy()
			}
		}
		if leave != nil {
			a.leaveGate = leave
			defer func() {
				if a.leaveGate != nil {
					a.leaveGate()
				}
			}()
			p.hit(faultGateHeld)
		}
	}

	return p.loop(ctx, wait, pol, a, start, req.Watch)
}

// contender is what the acquire loop makes its passes with: the attempt
// at a plain lock, or at a semaphore's slots (semAttempt, semaphore.go).
type contender interface {
	// pass is one attempt, which never sleeps (see attempt.pass).
	pass(skipJudge bool) (outcome, lock.Handle, error)
	// busy, timeout and waitEnded build the errors of a try that found
	// the lock busy, of a wait the Patience or Ceiling rule ended, and of
	// one the caller's context ended.
	busy() error
	timeout(bound string) error
	waitEnded(ctxErr error) error
	// newWaiter subscribes to the releases that may let the next pass in;
	// block as for Protocol.newWaiter.
	newWaiter(block bool) *waiter
	// log reports the loop's events (debug).
	log(msg string, args ...any)
}

// loop is the protocol's one acquire loop: passes, and between them the
// sleeps of a waiter, under the policy's bounds. watch, when set, is told
// when the loop first sleeps (lock.Request.Watch).
func (p *Protocol) loop(ctx context.Context, wait bool, pol *policy, c contender, start time.Time, watch lock.WaitWatcher) (lock.Handle, error) {
	var w *waiter
	defer func() { w.close() }()
	immediate := 0
	// woken: the last sleep ended because the lock was removed. The lock
	// a failed mkdir then finds was made a moment ago by the winner of
	// this hand-off, so judging it (reading its record, asking whether its
	// pid lives) is skipped: with many waiters, every one of them would
	// otherwise do that work on every hand-off. A holder that died is
	// still found at the next timed retry, at most MaxPoll later.
	woken := false
	for {
		// The ceiling first, on every pass, on its own.
		if wait && pol.ceilingReached() {
			return nil, c.timeout(ceilingBound(p.cfg))
		}
		out, h, err := c.pass(woken)
		woken = false
		switch out {
		case passHeld:
			c.log("hold: acquired", "waited", time.Since(start))
			return h, nil
		case passFailed:
			return nil, err
		case passAgain:
			immediate++
			if immediate <= maxImmediate {
				continue
			}
		}
		immediate = 0
		if !wait {
			return nil, c.busy()
		}
		if w == nil {
			// Watch before looking again: a release between our failed
			// mkdir and the watch would otherwise be missed.
			c.log("hold: waiting for lock")
			pol.noteWaiting()
			if watch != nil {
				ctx = watch.Waiting(ctx)
			}
			w = c.newWaiter(ctx.Done() == nil)
			continue
		}
		if pol.wedged() {
			return nil, c.timeout(patienceBound(p.cfg))
		}
		if woken, err = w.sleep(ctx, w.backoff(pol.nextDeadline())); err != nil {
			return nil, c.waitEnded(err)
		}
	}
}

// newWaiter and log make attempt a contender.
func (a *attempt) newWaiter(block bool) *waiter {
	return a.p.newWaiter(a.path, a.p.cfg.MaxPoll, block)
}

func (a *attempt) log(msg string, args ...any) {
	switch msg {
	case "hold: acquired":
		args = append(args, "reclaimed", a.reclaimed)
	case "hold: waiting for lock":
		args = append(args, "holder", a.seen.why)
	}
	a.logger(msg, args...)
}

// pass is one acquisition attempt: the claim (mkdir and the stamp, or the
// file form's exclusive create of its record); on contention, a guarded
// reclaim of a stale lock (unless skipJudge); on success, the stamp's
// read-back. It never sleeps, except to ride out an unreadable read-back.
func (a *attempt) pass(skipJudge bool) (outcome, lock.Handle, error) {
	if skipJudge && a.leaveGate == nil {
		// Woken by a release, with every other waiter: most of them find
		// the lock retaken already. A stat sees that without the parent
		// directory's lock, which mkdir takes even to fail, and which the
		// winner's mkdir and stamp and the releaser's cleanup all need:
		// a herd of failing mkdirs would queue in front of them. Past the
		// gate there is no herd, and the stat would only delay the mkdir
		// that takes the lock.
		if _, err := lstat(a.path); err == nil {
			return passBusy, nil, nil
		}
	}
	// The claim step is the one thing the file form changes.
	var c claimed
	var out outcome
	var err error
	if a.soft {
		c, out, err = a.claimFile()
	} else {
		c, out, err = a.claimDir()
	}
	if c.d == nil {
		if out != passBusy {
			return out, nil, err
		}
		if skipJudge {
			return passBusy, nil, nil
		}
		return a.contended()
	}
	d, owner, stamp := c.d, c.owner, c.stamp
	a.p.hit(faultAfterStamp)
	if !a.confirm(d, stamp) {
		// Our directory (or lock file) was taken from the path. Withdraw
		// our stamp from it: a reclaimer that moved it aside while we stamped may yet put
		// it back, and a directory naming us, alive, would then stay "live"
		// with no handle behind it until this process exits. Unstamped, it
		// ages out like any ownerless lock.
		d.withdrawOwner()
		d.close()
		return passAgain, nil, nil
	}
	a.p.hit(faultAfterReadBack)
	leave := a.leaveGate
	a.leaveGate = nil
	h := a.p.newHandle(a.path, owner, stamp, d, leave, a.stale, a.stopWithin, a.heartbeat, a.lostIfTouched)
	h.slot = a.slot
	h.carry = a.carry
	return passHeld, h, nil
}

// claimed is what a claim step made: the lock (d), the owner it holds
// for and the record written, exactly, to be confirmed by the pass.
type claimed struct {
	d     *dirRef
	owner lock.Owner
	stamp []byte
}

// claimDir is the claim step of a pass on a lock directory: mkdir, then
// the owner record, written exclusively into the directory made. When it
// made nothing (c.d nil) it answers passBusy for a path someone has, for
// the pass to judge, or the pass's outcome and error.
func (a *attempt) claimDir() (c claimed, out outcome, err error) {
	err = os.Mkdir(a.path, 0o777)
	if err != nil {
		if !isMkdirContention(err) {
			return c, passFailed, &lock.Error{Op: "acquire", Path: a.path, Err: err}
		}
		if !errors.Is(err, os.ErrExist) {
			a.lastErr = err
		}
		// Contention: the pass judges what holds the path.
		return c, passBusy, nil
	}
	a.p.hit(faultAfterMkdir)
	d, err := openDir(a.path)
	if err != nil {
		// Our new directory is gone already: someone (mis)judged it
		// reclaimable. A lost race, not a failure.
		if errors.Is(err, os.ErrNotExist) {
			return c, passAgain, nil
		}
		// We made it and cannot hold it (no descriptor left, typically):
		// left there, the empty directory would keep everyone out until
		// it aged out. It is still ours: nobody removes a directory
		// younger than Grace, and this is microseconds after our mkdir;
		// rmdir removes it only while it is empty.
		rmdir(a.path)
		return c, passFailed, &lock.Error{Op: "acquire", Path: a.path, Err: err, Hint: resourceHint(err)}
	}
	owner := a.owner
	if a.nextFence != nil {
		owner.Fence = a.nextFence()
	}
	owner.StartedAt = time.Now()
	stamp := owner.Encode()
	if err := d.createOwner(stamp); err != nil {
		// ENOENT: our directory was removed before the stamp. EEXIST: the
		// directory holds someone else's stamp, so it is not ours. Both are
		// lost races; deleting anything here could free a newer holder's
		// lock.
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrExist) {
			d.close()
			return c, passAgain, nil
		}
		// A directory we made and cannot stamp would block everyone until
		// it ages out: remove it, if it is still ours, and report why.
		// Withdrawing a partly written record and the rmdir need no new
		// descriptor, which a failure for want of them cannot spare
		// (removeIfSame reads and lists what it moves, and would put it
		// back when it could not).
		// (Closed before the rmdir: Windows removes no directory that is
		// open without sharing.)
		d.withdrawOwner()
		fi, lerr := lstat(a.path)
		ours := lerr == nil && os.SameFile(fi, d.identity())
		d.close()
		if ours {
			rmdir(a.path)
		}
		return c, passFailed, &lock.Error{Op: "write owner record", Path: a.path, Err: err, Hint: resourceHint(err)}
	}
	return claimed{d: d, owner: owner, stamp: stamp}, passHeld, nil
}

// resourceHint explains an error for want of resources, "" for others.
func resourceHint(err error) string {
	if !isResourceError(err) {
		return ""
	}
	return "no file descriptor (or memory) was left to hold the lock; nothing was left behind. Raise the limit (ulimit -n) and try again"
}

// Read-back retries: an unreadable (not missing) stamp on Windows is
// usually a sharing violation that passes within milliseconds.
const (
	readBackRetries = 5
	readBackPause   = 10 * time.Millisecond
)

// confirm reads our stamp back before handing out the lock. The exclusive
// write already refuses another holder's directory, and the identity check
// in reclaim keeps us from deleting what we did not judge, but nothing
// keeps another process from deleting ours just after our stamp landed;
// that failure raises no error anywhere, so it is looked for here: the
// path must still be our directory, carrying our token.
func (a *attempt) confirm(d *dirRef, stamp []byte) bool {
	for try := 0; ; try++ {
		res := check(a.path, d, stamp)
		switch {
		case res == ours:
			return true
		case res == notOurs:
			return false
		case try == readBackRetries:
			// Never readable: the directory's identity decides (a
			// replacement is a different directory), and only when it was
			// seen to match.
			return res == inconclusive
		}
		time.Sleep(readBackPause)
	}
}

// ownership is what a check of a held lock found.
type ownership int

const (
	ours ownership = iota
	notOurs
	// inconclusive: the path is our directory but its record could not be
	// read.
	inconclusive
	// unknown: the path could not be examined at all.
	unknown
)

// check tells whether the lock path is still our directory d holding our
// stamp, byte for byte (only we write our token, so no decoding is
// needed, which keeps the per-beat and per-release checks cheap).
//
// The record is read first, through the path: our stamp carries a token
// only we write, and only into our own directory (through d), so finding
// it at the path shows the path is our directory, and the directory's
// identity is looked up only when the record cannot be read. That is one
// system call fewer on every read-back and heartbeat.
func check(path string, d *dirRef, stamp []byte) ownership {
	if d.file {
		return checkFile(path, d, stamp)
	}
	same, err := isStamp(path, stamp)
	if err == nil {
		if same {
			return ours
		}
		// Gone, or another record: not ours, whatever the directory.
		return notOurs
	}
	fi, err := lstat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return notOurs
		}
		return unknown
	}
	if !os.SameFile(fi, d.identity()) {
		return notOurs
	}
	return inconclusive
}

// contended handles a mkdir that found the path taken: judge it, and if
// its holder is gone, reclaim it under the guard.
func (a *attempt) contended() (outcome, lock.Handle, error) {
	// A first judgement without the guard: a live holder, the common case
	// under contention, is answered without touching the guard at all.
	a.seen = a.p.judgeAfter(a.path, a.stale)
	switch a.seen.verdict {
	case vanished:
		return passAgain, nil, nil
	case live:
		if a.seen.skew > 0 {
			return passFailed, nil, skewError("acquire", a.path, a.seen, a.holder())
		}
		return passBusy, nil, nil
	case foreign:
		return passFailed, nil, foreignError("acquire", a.path, a.seen.why)
	case failed:
		return passFailed, nil, failedError("acquire", a.path, a.seen)
	}
	guardFI, err := a.takeGuard()
	if err != nil {
		return passFailed, nil, err
	}
	if guardFI == nil {
		return passBusy, nil, nil
	}
	defer a.dropGuard(guardFI)
	a.p.hit(faultInGuard)
	// Judge again under the guard: this is the judgement that licenses the
	// delete, and its Lstat is the identity the delete must find.
	j := a.p.judgeAfter(a.path, a.stale)
	a.seen = j
	switch j.verdict {
	case vanished:
		return passAgain, nil, nil
	case live:
		return passBusy, nil, nil
	case foreign:
		return passFailed, nil, foreignError("acquire", a.path, j.why)
	case failed:
		return passFailed, nil, failedError("acquire", a.path, j)
	}
	a.p.hit(faultJudged)
	var res removal
	if j.fi.IsDir() {
		res, err = removeIfSame(a.path, j.fi, expect{token: j.token()}, func() { a.p.hit(faultReclaimMoved) }, nil)
	} else {
		var out outcome
		if out, res, j, err = a.reclaimFile(j); out != passAgain {
			return out, nil, err
		}
	}
	switch res {
	case removed:
		a.reclaimed = true
		switch {
		case j.fence > 0 && a.soft:
			// No room for a token in the record: hand it on (carry).
			a.carry = j.fence
		case j.fence > 0:
			// Continue the token of the protocol that released it.
			a.owner.Fence = j.fence + 1
		}
		a.logger("hold: reclaimed stale lock", "why", j.why)
		return passAgain, nil, nil
	case changed:
		return passAgain, nil, nil
	}
	if err != nil && !isRemoveContention(err) {
		return passFailed, nil, &lock.Error{Op: "reclaim", Path: a.path, Err: err}
	}
	if err != nil {
		a.lastErr = err
	}
	return passBusy, nil, nil
}

// reclaimFile removes a plain file judged free (j) from the lock path
// while holding the kernel lock on it (see flock.LockExisting): the kernel
// lock is taken without waiting (busy: a kernel holder came in since the
// judgement, so the lock is live), the path must still name the very file
// judged, which is judged again under that lock (a kernel holder may have
// come and gone, and left a newer token), and the file is moved aside and
// deleted before the kernel lock is let go. A kernel waiter that opened
// the file before the move gets its lock only on a file that is gone; it
// then finds it replaced and starts over on what the path holds now. When
// it gets as far as the removal, it answers passAgain with what
// removeIfSame did, and the judgement the removal acted on.
func (a *attempt) reclaimFile(j judgement) (outcome, removal, judgement, error) {
	k, jk := kernelLock(a.path, j)
	if k == nil {
		return a.verdictOutcome(jk), changed, jk, a.verdictErr(jk)
	}
	defer k.Release()
	a.p.hit(faultFileLocked)
	j = a.p.judgeLockedFile(a.path, max(a.stale, a.p.cfg.Grace))
	if j.verdict != stale || !os.SameFile(j.fi, jk.fi) {
		a.seen = j
		if j.verdict == stale {
			return passAgain, changed, j, nil
		}
		return a.verdictOutcome(j), changed, j, a.verdictErr(j)
	}
	res, err := removeIfSame(a.path, j.fi, expect{token: j.token()}, func() { a.p.hit(faultReclaimMoved) }, nil)
	return passAgain, res, j, err
}

// verdictOutcome and verdictErr are what a pass ends in on a judgement
// that licenses no removal.
func (a *attempt) verdictOutcome(j judgement) outcome {
	switch j.verdict {
	case live:
		a.seen = j
		return passBusy
	case foreign, failed:
		return passFailed
	}
	return passAgain
}

func (a *attempt) verdictErr(j judgement) error {
	switch j.verdict {
	case foreign:
		return foreignError("acquire", a.path, j.why)
	case failed:
		return failedError("acquire", a.path, j)
	}
	return nil
}

// takeGuard makes the reclaim guard. It returns the guard's identity when
// taken, nil when someone else has it (after clearing it if it is older
// than Grace: a reclaimer that crashed inside the guard must not disable
// recovery for good).
func (a *attempt) takeGuard() (os.FileInfo, error) {
	for try := 0; try < 2; try++ {
		err := os.Mkdir(a.guard, 0o777)
		if err == nil {
			fi, err := lstat(a.guard)
			if err != nil {
				return nil, nil
			}
			return fi, nil
		}
		if !isMkdirContention(err) {
			return nil, &lock.Error{Op: "reclaim", Path: a.guard, Err: err}
		}
		if !errors.Is(err, os.ErrExist) {
			// Mid-flight on Windows: we cannot even judge it reliably.
			a.lastErr = err
			return nil, nil
		}
		fi, err := lstat(a.guard)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, nil
		}
		// The guard normally lives for microseconds and never carries an
		// owner record, so age alone judges it, with the Grace floor: a
		// guard made a moment ago is never evicted. Evicting a guard is
		// itself removeIfSame: the guard we judged, or nothing.
		if time.Since(fi.ModTime()) <= a.p.cfg.Grace {
			return nil, nil
		}
		a.p.hit(faultGuardJudged)
		if res, _ := removeIfSame(a.guard, fi, expect{}, nil, nil); res != removed {
			return nil, nil
		}
		a.logger("hold: cleared an abandoned reclaim guard")
	}
	return nil, nil
}

// dropGuard removes our guard, if it is still ours (a guard we held past
// Grace may have been evicted and retaken by another reclaimer).
func (a *attempt) dropGuard(fi os.FileInfo) {
	removeIfSame(a.guard, fi, expect{}, nil, nil)
}

// holder describes the last judged holder for an error.
func (a *attempt) holder() *lock.Holder { return a.seen.holder() }

// hint explains what the owner record could not: why there is no owner,
// and the last mkdir error if it was not plain "exists".
func (a *attempt) hint() string {
	var s string
	j := a.seen
	switch {
	case j.unreadable != nil:
		s = "owner record exists but cannot be read: " + j.unreadable.Error()
	case j.lookErr != nil:
		s = j.why
	case j.fi != nil && j.owner == nil:
		s = fmt.Sprintf("%s, age %s (stale after %s)", j.why, j.age.Round(time.Millisecond), max(a.stale, a.p.cfg.Grace))
	}
	if a.lastErr != nil {
		if s != "" {
			s += "; "
		}
		s += "last error: " + a.lastErr.Error()
	}
	return s
}

func (a *attempt) busy() error {
	return &lock.Error{Op: "acquire", Path: a.path, Err: lock.ErrBusy, Holder: a.holder(), Hint: a.hint()}
}

// timeout builds the error of a wait that the Patience or Ceiling rule
// ended, saying which bound expired. It matches ErrTimeout and, like every
// expired wait in hold, context.DeadlineExceeded.
func (a *attempt) timeout(bound string) error {
	a.seen = a.p.judgeAfter(a.path, a.stale)
	return &lock.Error{Op: "acquire", Path: a.path,
		Err:    fmt.Errorf("%w: %s (%w)", lock.ErrTimeout, bound, context.DeadlineExceeded),
		Holder: a.holder(), Hint: a.hint()}
}

// waitEnded builds the error of a wait the caller's context ended.
func (a *attempt) waitEnded(ctxErr error) error {
	a.seen = a.p.judgeAfter(a.path, a.stale)
	return &lock.Error{Op: "acquire", Path: a.path, Err: lock.WaitError(ctxErr), Holder: a.holder(), Hint: a.hint()}
}
