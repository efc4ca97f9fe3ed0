package dirlock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/randname"
	"github.com/hold-dev/hold/lock"
)

// A semaphore of N slots at a lock path P is a directory P holding one
// lock directory per slot, "P/slot-I-of-N" (what else it holds:
// content.go). Each slot is a lock of this protocol, taken, judged,
// reclaimed and released by the rules of a plain lock: only its path is
// the semaphore's. So a crashed holder's slot is freed as its plain lock
// would be, a live one's never is, and nothing about staleness is
// decided here.
//
// The directory P is made whole, with its record (SemaphoreFile) and its
// token counter, under another name and renamed into place, so that it
// is never seen without them; it is never removed (like the waiting gate,
// a waiter may be on its way into it).
//
// N is in each slot's name. A request for N slots takes only the slots of
// N, and looks for a live slot of any other number, before it takes a
// slot and again after: one found fails the request with ErrSlotCount,
// naming the number in use, and gives back the slot it took. Two
// requests with different numbers that race cannot both miss each other,
// since each looks after its own slot is stamped: the later look sees the
// earlier stamp. (At worst both fail. Requests of one machine rarely race
// at all: the gate lets one at a time look and take.) A plain request on
// the path is one for a semaphore of one (Protocol.acquire).
//
// Tokens: "P/fence.K" names the last token handed out. A holder draws the
// next one between the mkdir of its slot and its stamp, by renaming
// fence.K to fence.K+1: one rename of a given name succeeds, so no token
// is given twice, and a holder that takes a slot after another's release
// draws after that holder drew. Tokens rise across all slots of P.
//
// Waiting: the waiters of one machine queue at one waiting gate
// ("P/slots.gate", see gate.go); the one at the front tries the slots in
// order and takes the first it can, and leaves the gate as soon as it
// holds one, so the next waiter goes for the next free slot. It sleeps
// until any slot's lock is removed (directory events), or its backoff
// ends (MaxPoll): a slot whose holder died is found at that look. On a
// network filesystem, waiters of different machines, and hold processes
// that could not use the gate, contend for the slots with no order among
// them, as they do for a plain lock. A try (TryAcquireSlot) that finds
// the gate taken is busy at once only when every slot has a live holder;
// otherwise it waits for the gate (behindGate), since the waiter there is
// taking a free slot, and is busy only if no slot is left.

// Names inside a semaphore's directory.
const (
	slotPrefix  = "slot-"
	fencePrefix = "fence."
	gateName    = "slots" // the gate's path is P/slots.gate
	newSuffix   = ".new-" // a semaphore directory being made, beside P
)

// MaxSlots is the most slots a semaphore of this protocol may have: every
// waiter's look goes over all of them.
const MaxSlots = 1024

// slotName names the lock of slot i of a semaphore of n slots.
func slotName(i, n int) string {
	return slotPrefix + strconv.Itoa(i) + "-of-" + strconv.Itoa(n)
}

// parseSlotName reads a slotName, and only a slotName: not its guard, its
// tombs or anything else.
func parseSlotName(name string) (i, n int, ok bool) {
	rest, ok := strings.CutPrefix(name, slotPrefix)
	if !ok {
		return 0, 0, false
	}
	a, b, ok := strings.Cut(rest, "-of-")
	if !ok {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || i < 0 || n < 1 || i >= n || strconv.Itoa(i) != a || strconv.Itoa(n) != b {
		return 0, 0, false
	}
	return i, n, true
}

// The semaphore capability of the protocol.
var _ lock.Semaphore = (*Protocol)(nil)

// slotHandle is a held slot: the slot's plain lock handle, and its place.
type slotHandle struct{ *handle }

var _ lock.SlotHandle = (*slotHandle)(nil)

// Slot returns the place held, 0 to N-1.
func (h *slotHandle) Slot() int { return h.handle.slot }

// AcquireSlot waits for one of req.Slots slots of the semaphore at
// req.Path, made when missing; see Acquire for how a wait ends.
func (p *Protocol) AcquireSlot(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(err)}
	}
	return p.acquireSlot(ctx, req, true)
}

// TryAcquireSlot takes a free slot now, reclaiming a stale one in line,
// and otherwise fails with ErrBusy naming every holder.
func (p *Protocol) TryAcquireSlot(req *lock.Request) (lock.Handle, error) {
	return p.acquireSlot(context.Background(), req, false)
}

// semAttempt is one acquisition of a slot.
type semAttempt struct {
	p     *Protocol
	path  string
	n     int
	req   *lock.Request
	slots []*attempt // slot i's attempt
	gate  *attempt   // the gate's; its path is the gate's, never taken
	// leave gives up this acquisition's place at the gate.
	leave func()
	// firstFence is where a new counter starts: a plain lock's token
	// continued, when the semaphore replaces a released kernel lock file.
	firstFence uint64
}

func (p *Protocol) acquireSlot(ctx context.Context, req *lock.Request, wait bool) (lock.Handle, error) {
	if req.Slots <= 1 {
		return p.acquire(ctx, req, wait)
	}
	if req.SoftFile {
		// filelock's record is one holder's: it has no room for slots.
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrInvalidOption,
			Hint: "the portable protocol's file form (filelock's SoftFileLock record) holds a plain lock only, not a semaphore's slots"}
	}
	if err := proc.ReadyForLock("acquire", req.Path); err != nil {
		return nil, err
	}
	return p.acquireSlots(ctx, req, req.Slots, wait)
}

// acquireSlots takes one of n slots of the semaphore at req.Path; n is 1
// for a plain request that found a semaphore there.
func (p *Protocol) acquireSlots(ctx context.Context, req *lock.Request, n int, wait bool) (lock.Handle, error) {
	if req.Shared {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrInvalidOption,
			Hint: "a semaphore's slots are held exclusively; ask for slots or for a shared lock, not both"}
	}
	if n > MaxSlots {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrInvalidOption,
			Hint: fmt.Sprintf("%d slots asked for; a semaphore of the portable protocol has at most %d", n, MaxSlots)}
	}
	s := &semAttempt{p: p, path: req.Path, n: n, req: req}
	first, err := p.newAttempt(req, req.Path)
	if err != nil {
		return nil, err
	}
	for i := range s.n {
		a := *first
		a.path = filepath.Join(s.path, slotName(i, s.n))
		a.guard, a.slot = a.path+GuardSuffix, i
		a.nextFence = s.nextFence
		s.slots = append(s.slots, &a)
	}
	g := *first
	g.path = filepath.Join(s.path, gateName)
	s.gate = &g
	start := time.Now()
	if err := s.ensure(); err != nil {
		return nil, err
	}

	pol := newPolicy(s.path, p.cfg, start)
	pol.look = s.fingerprint
	s.leave = func() {}
	if !p.cfg.Ungated {
		// The gate, as for a plain lock (gate.go), but left as soon as a
		// slot is held (pass): the next waiter goes for the next free slot.
		var l func()
		if wait {
			if l, err = s.gate.enterGate(ctx, pol); err != nil {
				return nil, s.named(err)
			}
		} else {
			var busy bool
			if l, busy = s.gate.tryGate(); busy {
				if l, err = s.behindGate(pol); err != nil {
					return nil, err
				}
			}
		}
		if l != nil {
			s.leave = l
			p.hit(faultGateHeld)
		}
	}
	defer func() { s.leave() }()
	// A slot's wait is not told to a deadlock watch: a semaphore's wait is
	// a deadlock only when every slot's holder is in the cycle, which the
	// cycle search does not follow, so it must not be taken for one.
	return p.loop(ctx, wait, pol, s, start, nil)
}

// timeout, waitEnded, newWaiter and log make semAttempt a contender (see
// Protocol.loop); pass and busy are below.
func (s *semAttempt) timeout(bound string) error { return s.named(s.gate.timeout(bound)) }

func (s *semAttempt) waitEnded(ctxErr error) error {
	return s.named(&lock.Error{Op: "acquire", Path: s.path, Err: lock.WaitError(ctxErr)})
}

func (s *semAttempt) newWaiter(bool) *waiter {
	paths := make([]string, len(s.slots))
	for i, a := range s.slots {
		paths[i] = a.path
	}
	return s.p.newSlotWaiter(paths, s.p.cfg.MaxPoll)
}

func (s *semAttempt) log(msg string, args ...any) {
	s.gate.logger(msg, append(args, "slots", s.n)...)
}

// pass tries every slot in order, and keeps the first it takes if no live
// slot of another number of slots is there.
func (s *semAttempt) pass(skipJudge bool) (outcome, lock.Handle, error) {
	if err := s.otherCount(); err != nil {
		return passFailed, nil, err
	}
	s.p.hit(faultSlotsScanned)
	again := false
	for _, a := range s.slots {
		out, h, err := a.pass(skipJudge)
		switch out {
		case passHeld:
			sh := &slotHandle{h.(*handle)}
			if err := s.otherCount(); err != nil {
				sh.Release()
				return passFailed, nil, err
			}
			s.record()
			s.leave()
			s.leave = func() {}
			s.log("hold: took a slot", "slot", sh.Slot())
			return passHeld, sh, nil
		case passFailed:
			if errors.Is(err, fs.ErrNotExist) {
				// The semaphore's directory was removed (by hand): make
				// it again.
				if err := s.ensure(); err != nil {
					return passFailed, nil, err
				}
				return passAgain, nil, nil
			}
			return passFailed, nil, err
		case passAgain:
			again = true
		}
	}
	if again {
		return passAgain, nil, nil
	}
	return passBusy, nil, nil
}

// ensure makes the semaphore's directory when the path is free, and
// refuses a path that holds a plain lock.
func (s *semAttempt) ensure() error {
	for try := 0; ; try++ {
		fi, err := lstat(s.path)
		switch {
		case err == nil && fi.IsDir():
			if _, ok := semaphoreSlots(s.path); ok {
				return nil
			}
		case errors.Is(err, fs.ErrNotExist):
			if err := s.create(); !errors.Is(err, fs.ErrExist) {
				return err
			}
			continue
		case err != nil:
			return &lock.Error{Op: "acquire", Path: s.path, Err: err}
		}
		// A plain lock (of this protocol, the kernel's, a Node tool's), or
		// what is no lock at all: judged as a plain lock is.
		plain, err := s.p.newAttempt(s.req, s.path)
		if err != nil {
			return err
		}
		out, _, err := plain.contended()
		switch {
		case out == passFailed:
			return err
		case out == passBusy || try >= maxImmediate:
			return &lock.Error{Op: "acquire", Path: s.path, Err: lock.ErrSlotCount, Holder: plain.holder(),
				Hint: "the lock path holds a plain lock (one holder), and no slot of a semaphore of " + strconv.Itoa(s.n) +
					" is taken beside it: ask again once it is released, or choose another lock path"}
		}
		if plain.reclaimed && plain.owner.Fence > 0 {
			// A released kernel lock file: the counter continues its token.
			s.firstFence = plain.owner.Fence - 1
		}
	}
}

// create makes the semaphore's directory, whole, under a name of its own
// beside the path, and renames it into place. It returns an error
// matching fs.ErrExist when something got there first.
func (s *semAttempt) create() error {
	tmp := s.path + newSuffix + randname.Hex(6)
	if err := os.Mkdir(tmp, 0o777); err != nil {
		return &lock.Error{Op: "acquire", Path: s.path, Err: err}
	}
	err := os.WriteFile(filepath.Join(tmp, fencePrefix+strconv.FormatUint(s.firstFence, 10)), nil, 0o666)
	if err == nil {
		err = os.WriteFile(filepath.Join(tmp, SemaphoreFile), semaphoreRecord(s.n), 0o666)
	}
	if err == nil {
		err = renameNoReplace(tmp, s.path)
		if err == nil {
			return nil
		}
		if _, lerr := lstat(s.path); lerr == nil {
			err = fs.ErrExist
		}
	}
	os.RemoveAll(tmp)
	if errors.Is(err, fs.ErrExist) {
		return fs.ErrExist
	}
	return &lock.Error{Op: "acquire", Path: s.path, Err: err}
}

// record keeps the number of slots in the semaphore's record, for Inspect
// to report while no slot is held. Best effort: only a holder writes it,
// after its count was checked.
func (s *semAttempt) record() {
	if n, _ := semaphoreSlots(s.path); n == s.n {
		return
	}
	rec := filepath.Join(s.path, SemaphoreFile)
	tmp := rec + ".tmp-" + randname.Hex(6)
	if err := os.WriteFile(tmp, semaphoreRecord(s.n), 0o666); err != nil {
		return
	}
	if os.Rename(tmp, rec) != nil {
		os.Remove(tmp)
	}
}

// otherCount fails with ErrSlotCount when a live slot of another number of
// slots is in the semaphore. A stale one is reclaimed on the way, by the
// rules of a plain lock.
func (s *semAttempt) otherCount() error {
	names, err := readNames(s.path)
	if err != nil {
		return nil // the slots' own mkdirs will say what is wrong
	}
	for _, name := range names {
		_, m, ok := parseSlotName(name)
		if !ok || m == s.n {
			continue
		}
		a := *s.slots[0]
		a.path = filepath.Join(s.path, name)
		a.guard = a.path + GuardSuffix
		a.seen = s.p.judgeAfter(a.path, a.stale)
		switch a.seen.verdict {
		case live:
			return slotCountError(s.path, s.n, m, a.holder())
		case stale:
			a.contended()
		}
	}
	return nil
}

// slotCountError is the error for a request of n slots on a semaphore
// held with m.
func slotCountError(path string, n, m int, h *lock.Holder) error {
	asked := fmt.Sprintf("%d were asked for", n)
	if n == 1 {
		asked = "a plain lock (one holder) was asked for"
	}
	held := fmt.Sprintf("held with %d slots", m)
	if m == 1 {
		held = "held as a plain lock (1 slot)"
	}
	return &lock.Error{Op: "acquire", Path: path, Err: lock.ErrSlotCount, Holder: h,
		Hint: fmt.Sprintf("the semaphore is %s, and %s; ask for %d, or change the number once no slot is held", held, asked, m)}
}

// readNames lists the directory at path.
func readNames(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// nextFence draws the next token from the semaphore's counter (see the
// top of this file); 0 when the counter is gone, which only a hand can do.
func (s *semAttempt) nextFence() uint64 {
	for range 1000 {
		k, ok := currentFence(s.path)
		if !ok {
			return 0
		}
		from := filepath.Join(s.path, fencePrefix+strconv.FormatUint(k, 10))
		to := filepath.Join(s.path, fencePrefix+strconv.FormatUint(k+1, 10))
		err := renameNoReplace(from, to)
		if err == nil {
			return k + 1
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrExist) {
			return 0
		}
		// Another holder drew it: draw again.
	}
	return 0
}

// currentFence reads the semaphore's counter: the last token handed out.
func currentFence(dir string) (uint64, bool) {
	names, err := readNames(dir)
	if err != nil {
		return 0, false
	}
	var k uint64
	found := false
	for _, name := range names {
		v, ok := strings.CutPrefix(name, fencePrefix)
		if !ok {
			continue
		}
		if x, err := strconv.ParseUint(v, 10, 64); err == nil && strconv.FormatUint(x, 10) == v && (!found || x > k) {
			k, found = x, true
		}
	}
	return k, found
}

// fingerprint is who holds the slots now, for the patience rule: the
// semaphore's directory and every slot holder's token.
func (s *semAttempt) fingerprint() fingerprint {
	fi, err := lstat(s.path)
	if err != nil {
		return fingerprint{}
	}
	var b strings.Builder
	for _, a := range s.slots {
		if o, err := readOwner(a.path); err == nil && o != nil {
			b.WriteString(o.ID)
		}
		b.WriteByte('/')
	}
	return fingerprint{fi: fi, token: b.String()}
}

// tryPass bounds how long a try waits behind the waiter at the gate
// while a slot is free: that waiter is taking a free slot, which takes it
// a moment, and then leaves the gate. Only a waiter that stops in the
// gate (Ctrl-Z) makes the bound matter.
const tryPass = 2 * time.Second

// behindGate is a try's answer to a gate another waiter is in: busy,
// naming every holder, when every slot has a live holder; otherwise the
// try waits for the gate, as the waiter in it is taking a free slot, and
// then looks at the slots itself, so that a try is busy only when the
// waiters ahead of it leave no slot. It returns the gate's leave (nil
// when the gate turned out unusable: go on without it).
func (s *semAttempt) behindGate(pol *policy) (func(), error) {
	if s.allHeld() {
		return nil, s.busy()
	}
	ctx, cancel := context.WithTimeout(context.Background(), tryPass)
	defer cancel()
	l, err := s.gate.enterGate(ctx, pol)
	if err != nil {
		if ctx.Err() != nil {
			return nil, s.busy()
		}
		return nil, s.named(err)
	}
	return l, nil
}

// allHeld says whether every slot has a live holder.
func (s *semAttempt) allHeld() bool {
	for _, a := range s.slots {
		if s.p.judge(a.path).verdict != live {
			return false
		}
	}
	return true
}

// busy is the error of a try that found every slot held.
func (s *semAttempt) busy() error {
	return s.named(&lock.Error{Op: "acquire", Path: s.path, Err: lock.ErrBusy})
}

// named puts the semaphore's path and holders into the error of a wait
// that ended.
func (s *semAttempt) named(err error) error {
	var le *lock.Error
	if !errors.As(err, &le) {
		return err
	}
	le.Path = s.path
	st := s.p.inspectSlots(s.path, s.n)
	le.Holder = st.Holder
	le.Hint = st.DescribeSlots()
	return le
}

// InspectSlots reports the semaphore at path: the number of slots in use
// (or last recorded, when none is held) and each slot's holder, judged as
// a plain lock is. A path that holds a plain lock is reported as Inspect
// reports it (Slots 0).
func (p *Protocol) InspectSlots(path string) (*lock.Status, error) {
	fi, err := lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &lock.Status{Path: path, Protocol: "dir"}, nil
	case err != nil:
		return nil, &lock.Error{Op: "inspect", Path: path, Err: err}
	}
	n, ok := semaphoreSlots(path)
	if !fi.IsDir() || !ok {
		return p.Inspect(path)
	}
	if m := liveCount(p, path); m > 0 {
		n = m
	}
	st := p.inspectSlots(path, n)
	return st, nil
}

// liveCount is the number of slots of the first live slot found in the
// semaphore at path, 0 when none is held.
func liveCount(p *Protocol, path string) int {
	names, _ := readNames(path)
	for _, name := range names {
		if _, m, ok := parseSlotName(name); ok && p.judge(filepath.Join(path, name)).verdict == live {
			return m
		}
	}
	return 0
}

// inspectSlots judges the n slots of the semaphore at path.
func (p *Protocol) inspectSlots(path string, n int) *lock.Status {
	st := &lock.Status{Path: path, Protocol: "dir", Slots: n, SlotHolders: make([]*lock.Holder, n)}
	st.Fence, _ = currentFence(path)
	var staleOne *lock.Holder
	for i := range n {
		j := p.judge(filepath.Join(path, slotName(i, n)))
		switch j.verdict {
		case live:
			st.SlotHolders[i] = j.holder()
			if st.Holder == nil {
				st.Holder = st.SlotHolders[i]
			}
		case stale:
			st.SlotHolders[i] = j.holder()
			if staleOne == nil {
				staleOne = st.SlotHolders[i]
			}
		}
	}
	switch {
	case st.Holder != nil:
		st.State = lock.HeldShared
	case staleOne != nil:
		st.State, st.Holder = lock.Stale, staleOne
	}
	return st
}

// breakSlots is Break for a semaphore: it removes every stale slot by the
// rules of a plain lock's reclaim, and with force every slot, live ones
// too (whose holders find their lock lost). Without force it fails with
// ErrBusy, naming the holders, when live slots remain and none was stale.
func (p *Protocol) breakSlots(path string, force bool) (*lock.Status, error) {
	st, err := p.InspectSlots(path)
	if err != nil {
		return nil, err
	}
	names, err := readNames(path)
	if err != nil {
		return st, &lock.Error{Op: "break", Path: path, Err: err}
	}
	broken, held := 0, 0
	for _, name := range names {
		if _, _, ok := parseSlotName(name); !ok {
			continue
		}
		slot := filepath.Join(path, name)
		a := &attempt{p: p, path: slot, guard: slot + GuardSuffix, logger: func(string, ...any) {}, stale: p.cfg.Stale, slot: -1}
		j := p.judge(slot)
		switch {
		case j.verdict == stale:
			if out, _, err := a.contended(); err != nil {
				return st, err
			} else if out != passBusy {
				broken++
			}
		case j.verdict == live && force:
			if _, err := removeIfSame(slot, j.fi, expect{token: j.token()}, nil, nil); err != nil {
				return st, &lock.Error{Op: "break", Path: slot, Err: err, Holder: j.holder()}
			}
			broken++
		case j.verdict == live:
			held++
		}
	}
	if held > 0 && broken == 0 {
		return st, &lock.Error{Op: "break", Path: path, Err: lock.ErrBusy, Holder: st.Holder,
			Hint: st.DescribeSlots() + ", none of them stale; --force removes them anyway"}
	}
	return st, nil
}

// describeSlots is Describe for a semaphore.
func (p *Protocol) describeSlots(path string) string {
	st, err := p.InspectSlots(path)
	if err != nil {
		return err.Error()
	}
	return "a semaphore: " + st.DescribeSlots()
}
