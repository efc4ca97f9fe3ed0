package flock

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// The lock file holds one owner record: a line of JSON, padded with spaces
// when a slightly shorter record replaces a longer one. Replacing it costs
// one pwrite at offset 0 and, normally, no ftruncate, which would double
// the cost of an acquisition.
// The fencing token is the record's fence (lock.DecodeFence): each
// exclusive holder reads the previous value and writes the next.

// readSize is how much of the lock file a reader looks at first; a record
// is normally a few hundred bytes.
const readSize = 2048

// padSlack is how much longer than the new record an old one may be and
// still be overwritten by padding rather than cut off with ftruncate.
const padSlack = 256

// readRecord reads the record in f. It returns the size of the file
// content it saw and the raw record, which aliases buf when it fits
// there. A file larger than lock.MaxRecordSize is not read at all (a nil
// record with its size): it is corrupt by definition.
func readRecord(f *lockFile, buf []byte) (size int64, raw []byte, err error) {
	// One pread: a short read of a regular file is its end, and the
	// record is normally a few hundred bytes. (readAt would ask again to
	// be told so.)
	n, err := f.readOnce(buf, 0)
	if err != nil {
		return 0, nil, err
	}
	if n < len(buf) {
		return int64(n), buf[:n], nil
	}
	// A large record, or a file that is not ours: look further, but
	// never past MaxRecordSize.
	size, err = f.size()
	if err != nil {
		return 0, nil, err
	}
	if size > lock.MaxRecordSize {
		return size, nil, nil
	}
	big := make([]byte, size+1)
	n, err = f.readAt(big, 0)
	if err != nil {
		return 0, nil, err
	}
	if n > lock.MaxRecordSize {
		// It grew meanwhile (a writer not holding the lock).
		return int64(n), nil, nil
	}
	return int64(n), big[:n], nil
}

// lastFence returns the fencing token to continue from, given what the
// lock file holds. For a file hold wrote it is the recorded token. An
// empty file has none (0). A file whose record is unreadable, or that has
// a record without a token (another tool's), may have had any token
// before: then the clock in microseconds stands in. No lock is taken a
// million times a second, so a count that started at 1, or at an earlier
// reading of the clock, is always below it — provided the wall clock is
// not set back. That keeps tokens strictly increasing even across a lock
// file that someone overwrote or that a crash left half-written.
func lastFence(size int64, raw []byte) uint64 {
	if size == 0 {
		return 0
	}
	if fence, ok := lock.DecodeFence(raw); ok && fence != 0 {
		return fence
	}
	return uint64(time.Now().UnixMicro())
}

// Whether hold may write into a lock file is decided here, and nowhere
// else. It writes only into a file that is provably its own: one link (a
// hard link would carry the record into another file), and content that
// is empty or an owner record (lock.IsOwnContent). Anything else is the
// user's data or another tool's file: a derived lock path holding one is
// refused (ErrForeign) and an explicit one (LockFile, --lock-file) is
// locked without being written, as flock(1) locks it. A file this process
// may not write, or another user's when running as root, is locked without
// a record too, whatever the path.
//
// The record is written lazily. An acquisition takes the lock and judges
// the file (usually without reading it, see verified); the record and the
// token are written when someone asks for them (Fence, Owner: `hold run`
// does, for HOLD_TOKEN), or once the hold has lasted recordDelay. A short
// hold that nobody asks about costs what gofrs/flock's does: open, flock,
// statx, close. Whoever looks in the meantime still never names a past
// holder: the file then holds a past record (released), or nothing, and
// readers fall back to the pids the kernel reports (/proc/locks). A file
// holding a live record (its writer was killed) is rewritten at once, so
// that nobody reads the dead writer as the holder.

// recordDelay is how long a hold lasts before its record is written
// unasked: long enough that short holds never write, even on a machine
// with more runnable processes than CPUs, where a holder is often
// preempted for a few milliseconds (docs/bench.md); short
// enough that a hold anyone waits on is soon named by its own record. The
// record is written between recordDelay and recordDelay + lazyTick into a
// hold (see lazy).
const recordDelay = 10 * time.Millisecond

// lazyTick is how often the lazy records' timer looks for holds that have
// lasted recordDelay, while any hold is listed. Each look wakes a thread
// of the runtime (and its monitor thread, when the process was waiting in
// the kernel): in a process that takes a lock again and again a hold is
// listed nearly all the time, so the timer runs all the time, and with a
// look every 10 ms the looks cost a tenth to a quarter of the CPU time of
// 8 or 30 processes handing a lock around on 2 CPUs (docs/bench.md).
// Every 50 ms they cost a fifth of that, and a hold is still named by its
// own record within 60 ms.
const lazyTick = 50 * time.Millisecond

// foreign returns why the lock file f, whose content is raw (size bytes;
// raw is nil when it was too large to read), is not hold's, or "".
func foreign(f *lockFile, size int64, raw []byte) string {
	if n := f.linkCount(); n != 1 {
		return fmt.Sprintf("it has %d hard links, so it is another file's too", n)
	}
	if raw == nil && size > 0 || !lock.IsOwnContent(raw) {
		return fmt.Sprintf("it holds %d bytes that are not a hold owner record (data, or another tool's file)", size)
	}
	return ""
}

// foreignError refuses a derived lock path that holds what hold did not
// create.
func foreignError(path, why string) error {
	return &lock.Error{Op: "acquire", Path: path, Err: lock.ErrForeign,
		Hint: why + "; hold never writes into such a file. Lock a separate file: name another target, or --name NAME; " +
			"--lock-file " + path + " locks it as flock(1) does, without an owner record or token. " +
			"If it is a lock file of hold's that a crash damaged, remove it"}
}

// checkForeign is the look at a derived lock path before waiting on it:
// a file hold would refuse once it held the lock is refused at once, not
// after a wait. It reads without the lock, so it may catch a holder in the
// middle of rewriting its record (a new record over the tail of a longer
// one, before the truncate): what starts as every record of hold's starts
// is left to the check under the lock, which decides.
func checkForeign(f *lockFile, req *lock.Request) error {
	if req.Explicit {
		return nil
	}
	path := req.Path
	if f.linkCount() == 1 && verified.has(f) {
		return nil
	}
	var buf [readSize]byte
	size, raw, err := readRecord(f, buf[:])
	if err != nil {
		return nil // the check under the lock reads again and reports it
	}
	if lock.HasRecordPrefix(raw) && f.linkCount() == 1 {
		return nil
	}
	if why := foreign(f, size, raw); why != "" {
		return foreignError(path, why)
	}
	return nil
}

// judge decides, once the lock is held, what this holder may do with the
// file: for a derived path holding what is not hold's it returns
// ErrForeign (the caller lets the lock go); for an explicit one it notes
// that no record will be written. eager asks for the record at once: the
// file holds a live record, whose writer is gone (its lock is ours now).
func (h *handle) judge(explicit bool) (eager bool, err error) {
	f := h.f
	if f.linkCount() == 1 && verified.has(f) {
		return false, nil
	}
	if f.dir {
		// Only an explicit path gets here (openLockFile).
		h.foreign("it is a directory")
		return false, nil
	}
	var buf [readSize]byte
	size, raw, err := readRecord(f, buf[:])
	if err != nil {
		return false, &lock.Error{Op: "read owner record", Path: h.path, Err: err}
	}
	if why := foreign(f, size, raw); why != "" {
		if !explicit {
			return false, foreignError(h.path, why)
		}
		h.foreign(why)
		return false, nil
	}
	// Nobody of hold's writes the file while this lock is held, so what
	// was read stands until publishLocked writes: it need not read again.
	h.read, h.readSize, h.readFence = true, size, lastFence(size, raw)
	if !h.owner.Shared {
		// Before this file is trusted (the verified cache): a file that
		// replaced the gate of a semaphore whose slots are held is no
		// lock to hold beside them (see slots.go).
		if held := orphanedSlots(h.path); held != nil {
			return false, orphanError(h.path, held)
		}
	}
	if size == 0 || lock.IsPastRecord(raw) {
		verified.add(f)
		return false, nil
	}
	return true, nil
}

// foreign notes that the lock file is not hold's: no record, no token.
func (h *handle) foreign(why string) {
	h.noRecord(why + ", so hold locks it without writing an owner record")
	h.tokenErr.(*lock.Error).Err = fmt.Errorf("%w: %w", lock.ErrNoToken, lock.ErrForeign)
	h.published = true
}

// unlist takes h out of lazy. Called with h.mu held.
func (h *handle) unlist() {
	if h.listed {
		h.listed = false
		lazy.remove(h)
	}
}

// publishLate is lazy's tick's, and any looker's in this process: write
// the record now.
func (h *handle) publishLate() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.publishLocked()
}

// publishLocked writes the owner record and, for an exclusive hold, the
// next fencing token, once, if the lock file is hold's to write (see
// above); a shared holder only reads the last token. Where the file is
// not hold's to write, the lock is kept with no record and no token
// (Fence 0), and tokenErr says why. The write is licensed by a look at
// the content made under the lock: judge's, or, when judge trusted the
// verified cache, the read made here for the token. Called with h.mu held.
func (h *handle) publishLocked() {
	if h.published {
		return
	}
	h.published = true
	if h.released {
		// Nothing may be written once the lock is gone; a token is only
		// ever handed out with the record that keeps the next one larger.
		h.noRecord("the lock was released before its token or record was asked for; ask while holding it")
		return
	}
	h.unlist()
	var buf [readSize]byte
	size, last := h.readSize, h.readFence
	if !h.read {
		var raw []byte
		var err error
		size, raw, err = readRecord(h.f, buf[:])
		if err != nil {
			h.tokenErr = &lock.Error{Op: "read owner record", Path: h.path, Err: err}
			return
		}
		if why := foreign(h.f, size, raw); why != "" {
			h.foreign(why)
			return
		}
		last = lastFence(size, raw)
	}
	if last == 0 && h.fenceAbove != "" {
		// A lock path without a token yet continues the tokens of the
		// file that earlier versions locked instead.
		last = fenceAt(h.fenceAbove)
	}
	if last < h.fenceFloor {
		// A semaphore's slot continues the tokens of all its slots.
		last = h.fenceFloor
	}
	if !h.slotFile {
		// One sequence per target: a plain holder continues the tokens
		// its semaphore's slots handed out too. They all hold the lock
		// file shared, so none can be handing one out now (slots.go).
		if _, fence, err := readCountAt(CountPath(h.path)); err == nil && fence > last {
			last = fence
		}
		if last == 0 {
			// Nothing recorded: a new lock file, or one made anew after
			// it (and the count file) was removed. Slot files keep the
			// last tokens of their holders, and the sequence goes on
			// above them.
			last = slotsFence(h.path)
		}
	}
	if h.owner.Shared {
		// A reader's token is only informative: the last one written.
		h.owner.Fence = last
		return
	}
	switch {
	case !h.writable:
		h.noRecord("this process may not write the lock file, so it holds no owner record of this holder")
		return
	case h.f.otherUsers():
		h.noRecord("the lock file belongs to another user, and hold running as root does not write into it")
		return
	}
	if last == math.MaxUint64 {
		// Only a forged record gets here; wrapping to 0 would break the
		// order worse than repeating the largest token does.
		last--
	}
	h.owner.Fence = last + 1
	if h.owner.ID == "" {
		h.owner.ID = lock.NewID()
	}
	b := h.owner.AppendEncode(buf[:0])
	if len(b) > lock.MaxRecordSize {
		// The next holder would take it for a stranger's file.
		h.noRecord(fmt.Sprintf("the owner record would be %d bytes, more than %d: the extra fields (Field, --field) are too large", len(b), lock.MaxRecordSize))
		return
	}
	pad := size - int64(len(b))
	if pad > 0 && pad <= padSlack {
		// Overwrite all of the old record: pad before the final newline.
		b = b[:len(b)-1]
		for range pad {
			b = append(b, ' ')
		}
		b = append(b, '\n')
	}
	if err := h.f.writeAt(b, 0); err != nil {
		h.noRecord("writing the owner record failed: " + err.Error())
		return
	}
	// Only now: overwriting a record we failed to write would damage the
	// previous holder's.
	h.recordLen = len(b)
	h.record = append(h.record[:0], b...)
	if size > int64(len(b)) {
		// After a much longer record: cut it down to ours.
		h.f.truncate(int64(len(b)))
	}
}

// noRecord notes that this holder writes no record, and why.
func (h *handle) noRecord(why string) {
	h.owner.Fence = 0
	h.tokenErr = &lock.Error{Op: "token", Path: h.path, Err: lock.ErrNoToken, Hint: why}
}

// erase replaces the record this holder wrote with a past record: the
// token, for the next holder to continue from, and the released flag, so
// that whoever reads it while the lock is held by another (one that
// writes no record, or has not written it yet) does not name this process.
// Nothing else of the holder stays on disk: not its command line, which
// may carry secrets, nor its fields. One write of the same length covers
// the whole record; the file is then cut to the past record alone (a few
// dozen bytes, rather than the holder's record's length in blanks), which
// keeps the token for the next holder either way: a crash between the two
// leaves the padded past record, as valid. Best effort: if the write
// fails, the full record stays, and the next holder overwrites it at once
// (judge: a live record). Only a holder that wrote its record pays the
// two calls; a short hold that never wrote one pays nothing.
func (h *handle) erase() {
	if h.recordLen > 0 && h.recordIntact() {
		var buf [readSize]byte
		if h.f.writeAt(lock.AppendPastRecord(buf[:0], h.owner.Fence, h.recordLen), 0) == nil {
			if n := lock.PastRecordLen(h.owner.Fence); n < h.recordLen {
				h.f.truncate(int64(n))
			}
		}
	}
}

// recordIntact reports whether the lock file still holds exactly the
// record this holder wrote. The holder's command may have written the
// file since: a lock file that is the user's own file by name (`hold run
// x.lock -c 'echo 1 > x.lock'`) then holds their data, which erase must
// not overwrite. One read, only for a hold that wrote its record: one
// pread of a byte more than the record, as readRecord reads, since a short
// read of a regular file is its end (one that came short for another
// reason would only make the record look changed, and keep it, which the
// next holder then overwrites at once).
func (h *handle) recordIntact() bool {
	got := make([]byte, len(h.record)+1)
	n, err := h.f.readOnce(got, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	return bytes.Equal(got[:n], h.record)
}

// holderOf describes who holds the lock that f could not take: the record
// in the file, whether the recorded process is alive and, on Linux, which
// pids the kernel says keep it (proc.LockKeepers). Reading /proc/locks can
// take milliseconds after an idle spell, too slow for the error of a wait
// that has just timed out, so unless thorough is set it is read only when
// the record does not explain the lock (no record, a recorded holder that
// is not alive, or one that no longer has the lock's file open with the
// lock: a look at its descriptors alone).
func holderOf(f *lockFile, thorough bool) *lock.Holder {
	lazy.publish(f)
	rec := readOwner(f)
	leftover := rec != nil && rec.Released
	h := &lock.Holder{Owner: rec, Alive: proc.Judge(rec)}
	if !thorough && h.Alive == lock.Alive && !leftover && proc.KeepsFile(rec.PID, f.procFd()) {
		// The recorded holder runs and keeps the lock: the record
		// explains it. (One that released it by hand, `flock -u 3`,
		// while another process took it since, does not.)
		return h
	}
	if leftover {
		// The record names a past holder: say nothing rather than
		// something false, unless the kernel knows better below.
		h.Owner, h.Alive = nil, lock.LivenessUnknown
	}
	if pids := proc.LockKeepers(f.procFd()); len(pids) > 0 {
		h.PIDs = pids
		h.Commands = make(map[int]string, len(pids))
		for _, pid := range pids {
			if c := proc.Cmdline(pid); c != "" {
				h.Commands[pid] = c
			}
		}
	}
	return h
}

// readOwner reads and decodes the record in f; nil when there is none,
// it cannot be read, or the file holds something other than a record of
// hold's (data of the user's must never be reported as a holder).
func readOwner(f *lockFile) *lock.Owner {
	var buf [readSize]byte
	if _, raw, err := readRecord(f, buf[:]); err == nil && lock.IsRecord(raw) {
		rec, _ := lock.DecodeOwner(raw)
		return rec
	}
	return nil
}

// fenceAt returns the last token that the owner record of hold in the
// file at path holds, 0 when it holds none (no file, data, another tool's
// file).
func fenceAt(path string) uint64 {
	f, err := openForInspect(path)
	if err != nil {
		return 0
	}
	defer f.close()
	if rec := readOwner(f); rec != nil {
		return rec.Fence
	}
	return 0
}

// holderAt is holderOf for a path, for when the waiting descriptor has
// been given away. Nil when the file cannot be opened.
func holderAt(path string) *lock.Holder {
	f, err := openForInspect(path)
	if err != nil {
		return nil
	}
	defer f.close()
	return holderOf(f, false)
}

// Inspect reports the state of the lock at path without creating the file.
// Whether the lock is held is decided by the kernel (non-blocking probes),
// never by the recorded pid: a dead recorded holder whose descriptor lives
// on in a child still holds the lock.
func (Protocol) Inspect(path string) (*lock.Status, error) { return inspectLock(path, probe) }

// inspectLock is Inspect, with the probe that tells the lock's state.
func inspectLock(path string, probe func(*lockFile) lock.State) (*lock.Status, error) {
	st := &lock.Status{Path: path, Protocol: "flock"}
	f, err := openForInspect(path)
	if err != nil {
		if os.IsNotExist(err) {
			return st, nil
		}
		return nil, err
	}
	defer f.close()
	state := probe(f)
	if state != lock.Free {
		lazy.publish(f)
	}
	rec := readOwner(f)
	if rec != nil {
		st.Fence = rec.Fence
	}
	if state == lock.Free {
		if rec != nil {
			// The last holder, for the record.
			st.Holder = &lock.Holder{Owner: rec, Alive: proc.Judge(rec)}
		}
		return st, nil
	}
	st.State = state
	st.Holder = holderOf(f, true)
	return st, nil
}

// probe tells free, shared or exclusive with non-blocking locks, taking
// the least disruptive one first: a shared probe does not disturb shared
// holders, and it fails only under an exclusive holder. (For the instant a
// probe holds the lock, a TryAcquire elsewhere may find it busy.)
func probe(f *lockFile) lock.State {
	if err := f.lock(true, false); err != nil {
		return lock.HeldExclusive
	}
	f.unlock()
	if err := f.lock(false, false); err != nil {
		return lock.HeldShared
	}
	f.unlock()
	return lock.Free
}

// probeExclusive tells only whether someone holds the lock exclusively
// (HeldExclusive) or not (Free), by probe's shared lock alone. It is the
// probe of a semaphore's lock file, which every slot holder and every
// slot try locks shared: probe's exclusive lock, for its instant, would
// refuse a try that asks for its shared lock then, which would say the
// semaphore is busy while its slots are free.
func probeExclusive(f *lockFile) lock.State {
	if heldExclusively(f) {
		return lock.HeldExclusive
	}
	return lock.Free
}
