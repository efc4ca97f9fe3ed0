package dirlock

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// OwnerFile is the owner record's name inside a lock directory, the name
// career-ops' dir-lock uses.
const OwnerFile = "owner.json"

// verdict is what judging a lock path concluded. It is three answers, not a
// boolean, because only one of them licenses a delete.
type verdict int

const (
	// live: someone holds it, or we could not establish otherwise. Wait.
	live verdict = iota
	// stale: something is there and its holder is gone. Removing it (under
	// the guard, by identity) is the recovery.
	stale
	// vanished: nothing was there when we looked. Not blocked, but never a
	// licence to delete: by the time we act the path may hold a lock
	// created legitimately in between.
	vanished
	// foreign: what is there is not a lock (see content.go): an error,
	// never a wait and never a delete.
	foreign
	// failed: the lock could not be judged for want of resources (no
	// file descriptor or memory left to read its record or list it). An
	// error at once: calling it live would wait for ever on a lock that
	// may be long stale, and calling it stale could delete a live one.
	failed
)

// judgement is one look at a lock path: what was there and what it means.
type judgement struct {
	verdict verdict
	// fi is the Lstat of the path the owner record was read under; the
	// identity a reclaim must find unchanged before it deletes anything.
	fi os.FileInfo
	// owner is the decoded record; nil when there is none, it is corrupt
	// or it could not be read.
	owner *lock.Owner
	// unreadable: the record exists but could not be read (permissions,
	// Windows sharing violations, a planted symlink). Not the same as
	// missing: it pins the lock live.
	unreadable error
	// lookErr: the path itself could not be examined (not ENOENT); for a
	// failed verdict, what failed.
	lookErr error
	// alive is proc.Judge's answer for the owner.
	alive lock.Liveness
	// age is how long ago the path's mtime (the heartbeat) was refreshed.
	age time.Duration
	// skew is set when the heartbeat is stamped further in the future
	// than the age rule's limit: how far ahead of this machine's clock it
	// is. Such a lock cannot be aged (it would look fresh for as long as
	// the clocks disagree, a day for a wrong time zone); acquisition
	// reports the clock skew rather than wait on it.
	skew time.Duration
	// why says in a few words what decided the verdict, for errors and
	// debug logs.
	why string
	// fence is the fencing token of a released record, or of a gone
	// kernel holder's record, at the path (see released.go); 0 otherwise.
	fence uint64
	// kernel is set when a kernel lock is held on a plain file at the
	// path: its holders, as the kernel protocol names them.
	kernel *lock.Holder
}

// token is the owner token the judgement saw, "" when there was none. A
// reclaim compares it after moving the lock away, because a filesystem may
// give a directory recreated at once the inode number of the old one.
func (j *judgement) token() string {
	if j.owner == nil {
		return ""
	}
	return j.owner.ID
}

// judge looks at path and decides whether its holder is gone. It is the
// one staleness rule of the protocol, used by acquisition, reclaim, Inspect
// and Break; liveness itself comes from proc.Judge. It judges by the
// protocol's stale time; an acquisition that was given its own judges by
// that one (judgeAfter).
func (p *Protocol) judge(path string) judgement { return p.judgeAfter(path, p.cfg.Stale) }

// judgeAfter is judge with the stale time staleAfter (floored at Grace).
func (p *Protocol) judgeAfter(path string, staleAfter time.Duration) judgement {
	limit := max(staleAfter, p.cfg.Grace)
	now := time.Now()
	fi, err := lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return judgement{verdict: vanished, why: "lock vanished"}
		}
		// Could not look (Windows EPERM while the directory is mid-flight):
		// answering "stale" here would hand a live lock to a delete.
		return judgement{verdict: live, lookErr: err, why: "could not examine the lock: " + err.Error()}
	}
	j := judgement{fi: fi, age: now.Sub(fi.ModTime())}
	if !fi.IsDir() {
		return p.judgeFile(path, j, limit)
	}
	j.owner, j.unreadable = readOwner(path)
	if isResourceError(j.unreadable) {
		return failedJudgement(fi, j.unreadable)
	}
	if j.unreadable != nil {
		j.verdict = live
		j.why = "owner record exists but cannot be read: " + j.unreadable.Error()
		return j
	}
	if j.owner != nil && j.owner.PID > 0 {
		j.alive = proc.Judge(j.owner)
	}
	if j.alive != lock.Alive {
		// Not a live holder's: before anything may reclaim it, or wait
		// for it to age, it must be a lock at all. (A live holder's
		// directory is not listed: that is the common case under
		// contention, and nothing there will be deleted.)
		why, err := foreignDir(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return judgement{verdict: vanished, why: "lock vanished"}
		case why == badRecord && j.age <= limit:
			// Possibly a record being written, seen through a
			// filesystem's cache: wait while the heartbeat is young.
			j.verdict = live
			j.why = why + ", " + heartbeatAge(j.age)
			p.noteSkew(&j, limit)
			return j
		case why != "":
			return judgement{verdict: foreign, fi: fi, owner: j.owner, why: why}
		case isResourceError(err):
			return failedJudgement(fi, err)
		case err != nil:
			j.verdict = live
			j.why = "the lock directory cannot be listed: " + err.Error()
			return j
		}
	}
	if j.owner == nil || j.owner.PID <= 0 {
		j.why = "no owner record (or an unusable one)"
		return p.byAge(j, limit)
	}
	switch j.alive {
	case lock.Dead:
		j.verdict = stale
		j.why = "owner process is gone"
		return j
	case lock.Alive:
		if isSelf(j.owner) && !p.isActive(j.owner.ID) {
			// Our own pid proves nothing about a lock no handle of ours
			// owns (a release that failed, a stamp never confirmed, another
			// copy of this package in the process). The heartbeat of a
			// live handle keeps its directory young, so the age rule frees
			// only what nobody refreshes.
			j.why = "a lock of this process that no handle of this protocol holds"
			return p.byAge(j, limit)
		}
		j.verdict = live
		j.why = "owner process is alive"
		return j
	}
	j.why = "owner cannot be checked from here (another host, pid namespace or boot, or an unknown process)"
	return p.byAge(j, limit)
}

// judgeFile judges a plain file at the lock path (j holds its Lstat and
// age). It is never a live lock of this protocol, but it may be one of the
// kernel protocol's, which shares lock paths with this one: a kernel
// holder writes its record once, when it takes the lock, and never
// refreshes anything, so its age says nothing. A file on which a kernel
// lock is held is therefore live, whatever its record and its age, and
// its holder is named from the kernel's lock table. That is asked by
// taking the kernel lock, without waiting (see flock.LockExisting); while
// it is held the content is judged (judgeLockedFile), since a kernel
// holder rewrites its record in place and a read beside that write could
// see half of it.
func (p *Protocol) judgeFile(path string, j judgement, limit time.Duration) judgement {
	if !j.fi.Mode().IsRegular() {
		why, _ := foreignContent(path, j.fi)
		return judgement{verdict: foreign, fi: j.fi, why: why}
	}
	k, jk := kernelLock(path, j)
	if k == nil {
		return jk
	}
	defer k.Release()
	return p.judgeLockedFile(path, limit)
}

// kernelLock takes the kernel lock on the plain file judged in j, without
// waiting. When it cannot (nil), the judgement says why: a kernel holder
// (live), a file gone or replaced (vanished), or a failure.
func kernelLock(path string, j judgement) (*flock.Existing, judgement) {
	k, err := flock.LockExisting(path)
	var le *lock.Error
	switch {
	case err == nil:
		if !k.Is(path, j.fi) {
			k.Release()
			return nil, judgement{verdict: vanished, why: "lock vanished"}
		}
		return k, j
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, lock.ErrNotRegular):
		// Gone, or replaced by something else since its Lstat.
		return nil, judgement{verdict: vanished, why: "lock vanished"}
	case errors.Is(err, fs.ErrPermission):
		// What hold cannot open it cannot read either (content.go).
		return nil, judgement{verdict: foreign, fi: j.fi, why: "a file hold cannot read is at the lock path"}
	case errors.Is(err, lock.ErrBusy) && errors.As(err, &le):
		j.verdict, j.kernel = live, le.Holder
		if j.kernel == nil {
			j.kernel = &lock.Holder{}
		}
		j.owner, j.alive = j.kernel.Owner, j.kernel.Alive
		j.why = "a kernel lock is held on the lock file" + kernelPIDs(j.kernel)
		return nil, j
	case isResourceError(err):
		return nil, failedJudgement(j.fi, err)
	}
	// Not known to be free: a kernel holder may be there.
	j.verdict, j.lookErr = live, err
	j.why = "could not ask whether a kernel lock is held on the lock file: " + err.Error()
	return nil, j
}

// judgeLockedFile judges the plain file at path while holding its kernel
// lock: nobody holds it. A released record (the kernel protocol's, or
// this one's past record) is free at once, and so is the record of a
// kernel holder that is gone (it died holding the lock, which died with
// it); anything else that is a lock (an empty file, or a record whose
// holder cannot be checked, typically a leftover of a tool that locked
// with an O_EXCL file of the same name) is judged by age. Anything else
// there is the user's.
func (p *Protocol) judgeLockedFile(path string, limit time.Duration) judgement {
	fi, err := lstat(path)
	if err != nil {
		return judgement{verdict: vanished, why: "lock vanished"}
	}
	j := judgement{fi: fi, age: time.Since(fi.ModTime())}
	why, err := foreignContent(path, fi)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return judgement{verdict: vanished, why: "lock vanished"}
	case isResourceError(err):
		return failedJudgement(fi, err)
	case why != "" && j.age <= limit && isPartialSoft(path):
		// Possibly filelock's record between its file's creation and
		// its write: wait while the file is young.
		j.verdict = live
		j.why = partialWhy + ", written " + j.age.Round(time.Millisecond).String() + " ago"
		return j
	case why != "":
		return judgement{verdict: foreign, fi: fi, why: why}
	}
	if fence, ok := releasedRecord(path); ok {
		// Released by the kernel protocol (or by this one, which
		// continued its token): free now, whatever its age.
		j.verdict, j.fence, j.why = stale, fence, releasedWhy(fence)
		return j
	}
	if o := fileOwner(path); o != nil && proc.Judge(o) == lock.Dead {
		j.owner, j.alive = o, lock.Dead
		j.verdict, j.fence = stale, o.Fence
		j.why = "a lock file whose holder is gone, with no kernel lock held on it"
		return j
	}
	if b, err := readSmallFile(path, lock.MaxRecordSize+1); err == nil {
		if r := parseFilelockSoft(b); r.kind != softNone {
			return p.judgeFilelock(j, r, limit)
		}
	}
	j.why = "a leftover " + kindOf(fi.Mode()) + " at the lock path, with no kernel lock held on it"
	return p.byAge(j, limit)
}

// judgeFilelock judges the file of a filelock soft lock at the lock path
// (r its record, j the judgement so far, with its Lstat) by filelock's own
// rules, so that hold takes over no lock that filelock would leave and
// leaves none that it would take. A holder this host can ask about (the
// same host, and a pid namespace and boot hold can see) is judged by its
// pid and start time: stale at once when gone, live while it runs, however
// old. A holder that cannot be asked is never taken over, since filelock's
// holders refresh nothing an age could be read from; but a lease
// (SoftFileLease) is renewed by its holder, and one not renewed for its
// duration is stale. A lock of a mode filelock itself never takes over is
// live. A file that names no holder (a break in progress, a released
// marker) is a leftover, judged by age.
func (p *Protocol) judgeFilelock(j judgement, r filelockSoft, limit time.Duration) judgement {
	const breakIt = "remove it with `hold break --force` once its holder is known to be gone"
	switch r.kind {
	case softLeftover:
		j.why = r.what + ", with no kernel lock held on it"
		return p.byAge(j, limit)
	case softUnjudged:
		j.verdict = live
		j.why = r.what + "; neither filelock nor hold ever takes it over: " + breakIt
		return j
	}
	j.owner = r.owner(j.fi)
	j.alive = proc.Judge(j.owner)
	who := r.what + " of pid " + strconv.Itoa(r.pid) + " on " + r.hostRaw
	switch j.alive {
	case lock.Dead:
		j.verdict = stale
		j.why = who + ", whose process is gone"
	case lock.Alive:
		j.verdict = live
		j.why = who + ", alive"
		if args := proc.Args(r.pid); len(args) > 0 {
			j.owner.Command = proc.MaskSecrets(args)
		}
	default:
		if r.lease > 0 {
			// A lease's holder renews it: one not renewed for its
			// duration is one filelock takes over, and so does hold.
			j.why = who + ", which cannot be checked from here (another host, pid namespace or boot), renewed every third of its " + r.lease.String()
			return p.byAge(j, max(r.lease, p.cfg.Grace))
		}
		j.verdict = live
		j.why = who + ", which cannot be checked from here (another host, pid namespace or boot): " +
			"filelock's holders refresh nothing an age could be read from, so neither filelock nor hold takes it over; " + breakIt
	}
	return j
}

// kernelPIDs names the processes the kernel says hold a lock, for a
// judgement's why: " (pid 12: flock x.lock sleep 30)".
func kernelPIDs(h *lock.Holder) string {
	if len(h.PIDs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(" (")
	for i, pid := range h.PIDs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("pid " + strconv.Itoa(pid))
		if c := h.Commands[pid]; c != "" {
			b.WriteString(": " + c)
		}
	}
	b.WriteString(")")
	return b.String()
}

// holder is the holder a judgement names, for errors and Inspect: the
// kernel's holders when a kernel lock is held on a lock file, else the
// owner record and its liveness.
func (j *judgement) holder() *lock.Holder {
	if j.kernel != nil {
		h := *j.kernel
		return &h
	}
	return &lock.Holder{Owner: j.owner, Alive: j.alive}
}

// failedJudgement is the judgement of a lock that could not be judged
// for want of resources (see failed).
func failedJudgement(fi os.FileInfo, err error) judgement {
	return judgement{verdict: failed, fi: fi, lookErr: err, why: "the lock could not be judged: " + err.Error()}
}

// isResourceError reports a failure for want of resources, not a fact
// about the lock: no file descriptor left in this process (EMFILE) or on
// the system (ENFILE), or no memory.
func isResourceError(err error) bool {
	return err != nil && (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOMEM) || errors.Is(err, syscall.ENOBUFS))
}

// failedError is the error of an operation on a lock that could not be
// judged (verdict failed).
func failedError(op, path string, j judgement) error {
	return &lock.Error{Op: op, Path: path, Err: j.lookErr,
		Hint: "hold could not judge the lock for want of file descriptors or memory, and neither waits on it nor removes it; raise the limit (ulimit -n) or free resources, and try again"}
}

// byAge applies the age rule: stale when the heartbeat is older than limit
// (the stale time, never less than Grace).
func (p *Protocol) byAge(j judgement, limit time.Duration) judgement {
	switch {
	case j.age > limit:
		j.verdict = stale
		j.why += ", heartbeat older than " + limit.String()
	default:
		j.verdict = live
		j.why += ", " + heartbeatAge(j.age)
		p.noteSkew(&j, limit)
	}
	return j
}

// noteSkew marks a judgement whose heartbeat is further in the future than
// the age rule's limit: live as far as anyone can tell, but not for the
// age rule to judge, since the clocks disagree by more than the stale time.
func (p *Protocol) noteSkew(j *judgement, limit time.Duration) {
	if -j.age > limit {
		j.skew = -j.age
		j.why += ": clock skew, the clock that stamped it (the holder's host's, or the file server's) " +
			"is ahead of this machine's by more than the stale time (" + limit.String() + ")"
	}
}

// heartbeatAge says how old a heartbeat is, or how far in the future a
// skewed clock stamped it ("heartbeat 2s in the future", not "-2s old").
func heartbeatAge(age time.Duration) string {
	if age < 0 {
		return "heartbeat " + (-age).Round(time.Millisecond).String() + " in the future"
	}
	return "heartbeat " + age.Round(time.Millisecond).String() + " old"
}

// skewError is the error for a lock whose heartbeat is stamped in the
// future beyond the age rule's limit: waiting for it to age would last as
// long as the clocks disagree, so the caller is told at once what to fix.
func skewError(op, path string, j judgement, holder *lock.Holder) error {
	return &lock.Error{Op: op, Path: path, Err: errClockSkew, Holder: holder,
		Hint: j.why + "; set the clocks right (NTP), or if the holder is known to be gone, remove the lock with `hold break --force`"}
}

// errClockSkew is the cause of skewError.
var errClockSkew = errors.New("cannot judge the lock: its heartbeat is in the future (clock skew)")

// readOwner reads the owner record of the lock directory dir. It tells
// apart absence, which is a fact (ENOENT: a lock between mkdir and stamp,
// or a proper-lockfile lock; ENOTDIR: no directory for a record to be in),
// from failure to look, which is not: on Windows a live holder's record is
// momentarily unreadable while waiters churn, and collapsing that into "no
// record" lets the age rule condemn a live lock. A corrupt record is
// readable but meaningless: it is returned as nil, for the age rule.
func readOwner(dir string) (*lock.Owner, error) {
	raw, err := readRecord(dir)
	if raw == nil || err != nil {
		return nil, err
	}
	o, _ := lock.DecodeOwner(raw)
	return o, nil
}

// readRecord returns the raw owner record of the lock directory dir: nil
// with a nil error when there is none (absence is a fact), an error when
// it could not be read.
func readRecord(dir string) ([]byte, error) {
	b, err := readSmallFile(filepath.Join(dir, OwnerFile), lock.MaxRecordSize+1)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, nil
		}
		return nil, err
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// isSelf reports whether a record names this process.
func isSelf(o *lock.Owner) bool {
	if o.PID != os.Getpid() || !proc.Local(o) {
		return false
	}
	self := proc.Self()
	return o.ProcStart == 0 || self.ProcStart == 0 || o.ProcStart == self.ProcStart
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsRegular():
		return "file"
	}
	return "non-directory"
}

// fingerprint identifies "which holder has the lock now", to tell a lock
// that is changing hands (progress: re-arm the patience window) from one
// that is wedged. The zero value means free or unobservable, which is no
// evidence either way.
type fingerprint struct {
	fi    os.FileInfo
	token string
}

func (f fingerprint) same(g fingerprint) bool {
	return f.fi != nil && g.fi != nil && f.token == g.token && os.SameFile(f.fi, g.fi)
}

func takeFingerprint(path string) fingerprint {
	fi, err := lstat(path)
	if err != nil {
		return fingerprint{}
	}
	var token string
	if fi.IsDir() {
		if o, err := readOwner(path); err == nil && o != nil {
			token = o.ID
		}
	}
	return fingerprint{fi: fi, token: token}
}
