package dirlock

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// What the protocol may delete is decided here, and nowhere else. A lock
// path is provably a lock, or a lock's leftover, when it is:
//
//   - an empty directory (proper-lockfile's lock, or one of ours between
//     mkdir and stamp);
//   - a directory holding only an owner record (owner.json that is empty,
//     as a crash between its creation and its write leaves it, or a lock
//     record: lock.IsLockRecord);
//   - an empty plain file, or one holding a lock record (a leftover of a
//     tool that locked with an O_EXCL file of the same name);
//   - a plain file holding the record of Python filelock's soft lock
//     (SoftFileLock and its kin, which lock with an O_EXCL file of the
//     same name: see filelockSoft below), whose holder judge.go judges.
//
// Anything else there (a directory of photos, a data file, a symlink, a
// FIFO) is the user's: it is never deleted, never waited on, and every
// attempt to lock it fails at once with lock.ErrForeign. The content is
// judged before a reclaim moves anything aside, and again, on what was
// moved, before anything is deleted (removeIfSame).

// A semaphore (semaphore.go) is a directory at the lock path that holds
// the file SemaphoreFile: the slots' locks, each a lock directory by the
// rules above, and the semaphore's own files are inside it. It is not a
// lock: judged as one, it is foreign (errSemaphoreHere), which a plain
// acquisition takes as its cue to ask for the slot of a semaphore of one.
// It is never deleted. Its entries are:
//
//   - SemaphoreFile: the number of slots its last holder asked for, in
//     decimal (semaphoreSlots), and "SemaphoreFile.tmp-*" while it is
//     replaced;
//   - "slot-I-of-N": the lock of slot I of a semaphore of N slots (slotName),
//     with its reclaim guard "slot-I-of-N.recover" and its tombs
//     "slot-I-of-N.rm-*" beside it;
//   - "fence.K": the token counter, K being the last token handed out;
//   - "slots.gate.queue" (Linux; "slots.gate.q" on other unix systems,
//     "slots.gate" on Windows): the waiting gate.

// SemaphoreFile names the file that makes a directory at a lock path a
// semaphore, and records its number of slots.
const SemaphoreFile = "semaphore"

// errSemaphoreHere is what a plain lock's judgement makes of a semaphore
// at the lock path: not a lock (it matches lock.ErrForeign), and for an
// acquisition, the cue to take it as a semaphore of one.
var errSemaphoreHere error = semaphoreHere{}

type semaphoreHere struct{}

func (semaphoreHere) Error() string        { return "a semaphore is at the lock path" }
func (semaphoreHere) Is(target error) bool { return target == lock.ErrForeign }

// semaphoreWhy starts foreignDir's answer for a semaphore's directory.
const semaphoreWhy = "a semaphore"

// semaphoreSlots reports whether the directory at path is a semaphore, and
// the number of slots its record holds (0 when it cannot be read).
func semaphoreSlots(path string) (n int, ok bool) {
	b, err := readSmallFile(filepath.Join(path, SemaphoreFile), 32)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return 0, false
		}
		// There, but unreadable: a semaphore whose number is unknown.
		_, serr := lstat(filepath.Join(path, SemaphoreFile))
		return 0, serr == nil
	}
	n, err = strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 1 {
		return 0, true
	}
	return n, true
}

// semaphoreRecord is what SemaphoreFile holds for n slots.
func semaphoreRecord(n int) []byte { return []byte(strconv.Itoa(n) + "\n") }

// maxEntries bounds how much of a directory is listed to judge it: a lock
// directory holds at most its owner record.
const maxEntries = 8

// foreignContent returns why what is at path (fi its Lstat) is not a lock,
// or "" when it is one (see above). err reports a look that failed; a path
// that cannot be examined is not judged foreign on that alone.
func foreignContent(path string, fi os.FileInfo) (why string, err error) {
	switch {
	case fi.IsDir():
		return foreignDir(path)
	case !fi.Mode().IsRegular():
		return "a " + kindOf(fi.Mode()) + " is at the lock path", nil
	}
	b, err := readSmallFile(path, lock.MaxRecordSize+1)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || isResourceError(err) {
			return "", err
		}
		return "a file hold cannot read is at the lock path", nil
	}
	if len(b) == 0 || lock.IsLockRecord(b) {
		return "", nil
	}
	switch r := parseFilelockSoft(b); r.kind {
	case softStrict:
		return r.what + " is at the lock path: whether it is held is decided by the claims directory filelock keeps beside it, " +
			"which hold does not read; lock this path with the same tool in every process", nil
	case softPartial:
		return partialWhy + " is at the lock path, and has been for longer than a record takes to write", nil
	case softHolder, softUnjudged, softLeftover:
		return "", nil
	}
	return fmt.Sprintf("a file of %d bytes that is not a lock record is at the lock path", fi.Size()), nil
}

// badRecord is foreignDir's answer for a directory that holds nothing but
// an owner.json that is not a lock record. On a network or FUSE filesystem
// a reader can see a record half written, or through a stale cache, for a
// moment: the judgement waits such a directory out while its heartbeat is
// young, and calls it foreign only once it is old (judge).
const badRecord = "the directory's " + OwnerFile + " is not a lock record"

// foreignDir is foreignContent for a directory.
func foreignDir(path string) (string, error) {
	if n, ok := semaphoreSlots(path); ok {
		return fmt.Sprintf("%s of %d slots is at the lock path", semaphoreWhy, n), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	names, err := f.Readdirnames(maxEntries)
	f.Close()
	if err != nil && len(names) == 0 {
		if errors.Is(err, io.EOF) {
			return "", nil
		}
		return "", err
	}
	var others []string
	for _, n := range names {
		if isSillyRename(n) {
			continue
		}
		if n != OwnerFile {
			others = append(others, n)
			continue
		}
		b, err := readSmallFile(filepath.Join(path, n), lock.MaxRecordSize+1)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // withdrawn meanwhile
			}
			return "", err
		}
		if len(b) > 0 && !lock.IsLockRecord(b) {
			return badRecord, nil
		}
	}
	if len(others) == 0 {
		return "", nil
	}
	more := ""
	if len(names) == maxEntries {
		more = ", …"
	}
	return fmt.Sprintf("the directory holds files that are not a lock's (%s%s)", strings.Join(quoteAll(others), ", "), more), nil
}

func quoteAll(s []string) []string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return q
}

// foreignError is the error for a lock path holding what is not a lock.
func foreignError(op, path, why string) error {
	if strings.HasPrefix(why, semaphoreWhy) {
		return &lock.Error{Op: op, Path: path, Err: errSemaphoreHere,
			Hint: why + ", not a plain lock: ask for one of its slots with the same number of slots (hold run --slots N, hold.Slots)"}
	}
	return &lock.Error{Op: op, Path: path, Err: lock.ErrForeign,
		Hint: why + "; hold never deletes or waits on such a thing. Choose another lock path (another target, --lock-file or --name), or move it away if it is yours to move"}
}

// isSillyRename reports the name a network or FUSE filesystem gives a file
// that was deleted while still open (NFS's .nfsXXXX, libfuse's
// .fuse_hiddenXXXX, Samba's .smbdeleteXXXX): inside a lock directory that
// is an owner record a reader still had open when its holder removed it.
// It is hold's own, and the filesystem removes it once the reader closes.
func isSillyRename(name string) bool {
	return strings.HasPrefix(name, ".nfs") || strings.HasPrefix(name, ".fuse_hidden") || strings.HasPrefix(name, ".smbdelete")
}

// The kernel protocol refuses to flock a lock directory of ours (IsLockDir).
func init() { flock.SetPortableLockCheck(IsLockDir) }

// IsLockDir reports whether the directory at path is a lock of this
// protocol's by the rule above: it holds an owner record and nothing else,
// or it is empty and its name ends in ".lock", as proper-lockfile makes
// its locks; or it is a semaphore, whose slots are such locks. The
// kernel protocol asks before it flocks a directory (as
// flock(1) does): such a lock is held by its existence, so a kernel lock
// on it would not exclude its holder.
func IsLockDir(path string) bool {
	if _, ok := semaphoreSlots(path); ok {
		// A semaphore's slots are held by their directories too.
		return true
	}
	if why, err := foreignDir(path); err != nil || why != "" {
		return false
	}
	if strings.HasSuffix(filepath.Clean(path), ".lock") {
		return true
	}
	_, err := os.Lstat(filepath.Join(path, OwnerFile))
	return err == nil
}

// Python's filelock (3.22 and later, 4.x) makes a soft lock
// (SoftFileLock, MarkerSoftFileLock and their async forms) as a plain file
// at the lock path, created with O_EXCL, that names its holder. hold's
// portable protocol shares the path with it: a filelock holder's file is
// a lock, whose holder judge.go judges (judgeFilelock), and waited for
// like any other. filelock 4.3.1 writes these forms:
//
//   - "PID\nHOST\n" or "PID\nHOST\nSTART\n" (SoftFileLock): HOST is the
//     host name with every byte outside 0x21-0x7e and '?' written "?xx",
//     followed by "?pidns-INODE" (hex) when the holder is not in the
//     initial pid namespace; START is, on Linux, the boot id (as a 128-bit
//     number) shifted left by 64 bits plus the process start time in clock
//     ticks;
//   - "filelock/2\n" and then key=value lines with pid, host and mode
//     ("exclusive", "lease" or another mode, which it never takes over),
//     and perhaps token, duration and start (MarkerSoftFileLock,
//     SoftFileLease);
//   - StrictSoftFileLock's sentinel, which hands the lock to a claims
//     directory filelock keeps beside it: not a lock hold can judge, so
//     foreign (an error that says so, never a wait that might not end);
//   - while it takes over a stale lock, "filelock/break\nPID\n", and on a
//     marker it has let go, "filelock/released\n": leftovers.
//
// A file filelock has created and not yet written is empty (a leftover,
// as any empty file) or holds part of its record: filelock writes its
// record in one write just after creating the file, so a part seen for
// longer than the grace period is not filelock's but someone's data, a
// pid file most likely, and is never deleted.

// softKind is what a plain file at the lock path holds of filelock's.
type softKind int

const (
	// softNone: not filelock's.
	softNone softKind = iota
	// softHolder: a record naming its holder (pid, host, start).
	softHolder
	// softUnjudged: a lock filelock itself never takes over (a marker of
	// a mode it does not know), which names its holder.
	softUnjudged
	// softStrict: StrictSoftFileLock's sentinel, whose holder only the
	// claims directory beside it knows: foreign to hold.
	softStrict
	// softLeftover: a break in progress or a released marker, which
	// nothing names a holder of.
	softLeftover
	// softPartial: the start of a record, as filelock leaves it for the
	// moment between creating the file and writing it, but also what a
	// pid file ("4242\n") holds: waited on while young, foreign once old
	// (judgeLockedFile), never deleted.
	softPartial
)

// filelockSoft is a filelock soft lock's record (see above).
type filelockSoft struct {
	kind softKind
	// what says in a few words what the record is, for judgements.
	what string
	pid  int
	// host is the holder's host name, unescaped; hostRaw as recorded.
	host, hostRaw string
	// pidNS is the pid namespace the host field names (hasNS), else the
	// initial one.
	pidNS uint64
	hasNS bool
	// start is the recorded start token; nil when there is none.
	start *big.Int
	// lease is a lease's duration (mode "lease"): the age of its file past
	// which filelock takes it over; 0 for a lock.
	lease time.Duration
}

// partialWhy says what a softPartial file is.
const partialWhy = "a file holding only the start of a filelock soft lock record (or a pid file)"

// filelock's fixed records.
const (
	filelockStrictSentinel = "1\nfilelock-strict-v1\x00\n0\n"
	filelockMarkerHeader   = "filelock/2\n"
	filelockReleased       = "filelock/released\n"
	filelockBreakHeader    = "filelock/break\n"
	// filelockNSMark is what filelock appends to the host name of a
	// holder outside the initial pid namespace, before the inode in hex.
	filelockNSMark = "?pidns-"
	// initialPIDNS is the inode Linux gives the initial pid namespace.
	initialPIDNS = 0xEFFFFFFC
)

// parseFilelockSoft recognises a filelock soft lock's record in b, the
// whole content of a plain file at the lock path.
func parseFilelockSoft(b []byte) filelockSoft {
	s := string(b)
	switch {
	case len(s) == 0 || len(s) > 1024 || !utf8.ValidString(s):
		return filelockSoft{}
	case s == filelockStrictSentinel:
		return filelockSoft{kind: softStrict, what: "the sentinel of a filelock StrictSoftFileLock"}
	case s == filelockReleased:
		return filelockSoft{kind: softLeftover, what: "a filelock soft lock marker its holder let go"}
	case strings.HasPrefix(s, filelockBreakHeader):
		if isDecimal(strings.TrimSuffix(s[len(filelockBreakHeader):], "\n")) || len(s) == len(filelockBreakHeader) {
			return filelockSoft{kind: softLeftover, what: "the marker of a filelock process taking over a stale soft lock"}
		}
		return filelockSoft{}
	case strings.HasPrefix(s, filelockMarkerHeader):
		return parseFilelockMarker(s)
	case strings.HasPrefix(filelockMarkerHeader, s) || strings.HasPrefix(filelockBreakHeader, s):
		return filelockSoft{kind: softPartial, what: partialWhy}
	}
	if !strings.HasSuffix(s, "\n") {
		if isLegacyPrefix(s) {
			return filelockSoft{kind: softPartial, what: partialWhy}
		}
		return filelockSoft{}
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) == 1 && isDecimal(lines[0]) {
		return filelockSoft{kind: softPartial, what: partialWhy}
	}
	if len(lines) != 2 && len(lines) != 3 {
		return filelockSoft{}
	}
	r := filelockSoft{kind: softHolder, what: "a filelock soft lock"}
	var ok bool
	if r.pid, ok = parsePID(lines[0]); !ok || !r.setHost(lines[1]) {
		return filelockSoft{}
	}
	if len(lines) == 3 {
		if !isDecimal(lines[2]) {
			return filelockSoft{}
		}
		r.start, _ = new(big.Int).SetString(lines[2], 10)
	}
	return r
}

// parseFilelockMarker parses a "filelock/2" marker (s starts with its
// header).
func parseFilelockMarker(s string) filelockSoft {
	if !strings.HasSuffix(s, "\n") {
		return filelockSoft{kind: softPartial, what: partialWhy}
	}
	fields := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(s[len(filelockMarkerHeader):], "\n"), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return filelockSoft{}
		}
		fields[k] = v
	}
	mode, ok := fields["mode"]
	if !ok {
		return filelockSoft{}
	}
	r := filelockSoft{kind: softHolder, what: "a filelock soft lock (" + mode + ")"}
	if r.pid, ok = parsePID(fields["pid"]); !ok || !r.setHost(fields["host"]) {
		return filelockSoft{}
	}
	if v, ok := fields["start"]; ok {
		if !isDecimal(v) {
			return filelockSoft{}
		}
		r.start, _ = new(big.Int).SetString(v, 10)
	}
	if mode == "lease" {
		// A lease (SoftFileLease) is renewed: its holder touches the
		// file every third of its duration, which filelock requires.
		d, err := strconv.ParseFloat(fields["duration"], 64)
		if err != nil || !(d > 0) || d > (100*365*24*time.Hour).Seconds() || fields["token"] == "" {
			return filelockSoft{}
		}
		r.lease = time.Duration(d * float64(time.Second))
		r.what = "a filelock lease"
	}
	if mode != "exclusive" && mode != "lease" {
		// A newer filelock's mode: filelock never takes it over, so
		// that an older release cannot reclaim a lock it does not
		// understand. Neither does hold.
		r.kind = softUnjudged
		r.what = "a filelock soft lock of a mode this version does not know (" + mode + ")"
	}
	return r
}

// setHost takes the host field of a record: filelock's escapes undone,
// and the pid namespace mark split off. It reports whether the field is
// one filelock could have written (printable ASCII, no spaces). A field
// that does not decode (filelock shortens a name longer than 253
// characters with a digest, which can cut its escapes and its namespace
// mark) is kept as it is: a name with '?' in it, which no host has, so
// that its holder cannot be judged from here.
func (r *filelockSoft) setHost(field string) bool {
	if field == "" || strings.ContainsFunc(field, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
		return false
	}
	r.hostRaw, r.host = field, field
	name := field
	var ns uint64
	hasNS := false
	if i := strings.LastIndex(field, filelockNSMark); i >= 0 {
		v, err := strconv.ParseUint(field[i+len(filelockNSMark):], 16, 64)
		if err != nil {
			return true
		}
		name, ns, hasNS = field[:i], v, true
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c != '?' {
			b.WriteByte(c)
			continue
		}
		// "?xx", or "?" alone for an empty host name: kept as it is.
		if i+2 >= len(name) {
			return true
		}
		v, err := strconv.ParseUint(name[i+1:i+3], 16, 8)
		if err != nil {
			return true
		}
		b.WriteByte(byte(v))
		i += 2
	}
	r.host, r.pidNS, r.hasNS = b.String(), ns, hasNS
	return true
}

// owner is the record as hold's owner record, for the judgement and for
// Inspect (`hold status`): fi is the file's Lstat, whose mtime is when
// the holder took the lock (filelock writes its record once). The start
// token and the pid namespace are taken where they mean what hold's do
// (Linux); elsewhere the pid alone is judged.
func (r *filelockSoft) owner(fi os.FileInfo) *lock.Owner {
	o := &lock.Owner{PID: r.pid, Host: r.host, StartedAt: fi.ModTime(), Protocol: "filelock"}
	if runtime.GOOS != "linux" {
		return o
	}
	o.PIDNS = initialPIDNS
	if r.hasNS {
		o.PIDNS = r.pidNS
	}
	if r.start != nil {
		low := new(big.Int).And(r.start, new(big.Int).SetUint64(^uint64(0)))
		o.ProcStart = low.Uint64()
		if high := new(big.Int).Rsh(r.start, 64); high.Sign() > 0 && high.BitLen() <= 128 {
			h := fmt.Sprintf("%032x", high)
			o.BootID = h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
		}
	}
	return o
}

// namesFilelockHolder reports whether the plain file at path (fi its
// Lstat) holds a filelock soft lock's record that names a holder: one
// that may be alive, which a removal that moved it aside by mistake must
// not delete.
func namesFilelockHolder(path string, fi os.FileInfo) bool {
	if !fi.Mode().IsRegular() {
		return false
	}
	b, err := readSmallFile(path, lock.MaxRecordSize+1)
	if err != nil {
		return false
	}
	k := parseFilelockSoft(b).kind
	return k == softHolder || k == softUnjudged
}

// isPartialSoft reports whether the plain file at path holds only the
// start of a filelock record (softPartial).
func isPartialSoft(path string) bool {
	b, err := readSmallFile(path, lock.MaxRecordSize+1)
	return err == nil && parseFilelockSoft(b).kind == softPartial
}

// isLegacyPrefix reports whether s (without its final newline) is the
// start of a "PID\nHOST\nSTART\n" record.
func isLegacyPrefix(s string) bool {
	parts := strings.Split(s, "\n")
	if len(parts) > 3 || !isDecimal(parts[0]) {
		return false
	}
	if len(parts) >= 2 && strings.ContainsFunc(parts[1], func(c rune) bool { return c < 0x21 || c > 0x7e }) {
		return false
	}
	return len(parts) < 3 || parts[2] == "" || isDecimal(parts[2])
}

// parsePID parses a recorded pid, which filelock bounds to 1..2^31-1.
func parsePID(s string) (int, bool) {
	if !isDecimal(s) || len(s) > 10 {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 1 && n <= 1<<31-1
}

// isDecimal reports whether s is ASCII digits, at least one.
func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// filelockSoftRecord is the record of a file-form lock (lock.Request's
// SoftFile): what filelock 4.3.1's SoftFileLock writes for a holder, here
// naming this process, so that filelock judges it as it judges its own
// (owner_is_stale: same host field, pid alive and, where it reads one, the
// same start token) and parseFilelockSoft reads it back as a softHolder.
// The host field is filelock's spelling of the host name (see setHost),
// with the pid namespace mark outside the initial one. The start token is
// written only on Linux, where hold and filelock read the same clock ticks
// from /proc: elsewhere they count differently, and a token filelock
// reads as another process's would let it take the lock from a live
// holder, while without one it judges by the pid alone.
//
// ok is false when filelock would shorten the host's spelling with a
// digest (see filelockHost), which hold does not write.
func filelockSoftRecord() (record []byte, ok bool) {
	self := proc.SelfShared()
	ns, boot := proc.Where()
	host, ok := filelockHost(self.Host, ns)
	if !ok {
		return nil, false
	}
	b := strconv.AppendInt(nil, int64(self.PID), 10)
	b = append(b, '\n')
	b = append(b, host...)
	b = append(b, '\n')
	if runtime.GOOS == "linux" && self.ProcStart != 0 {
		token := new(big.Int).SetUint64(self.ProcStart)
		if id, ok := new(big.Int).SetString(strings.ReplaceAll(boot, "-", ""), 16); ok && boot != "" {
			token.Or(token, id.Lsh(id, 64))
		}
		b = token.Append(b, 10)
		b = append(b, '\n')
	}
	return b, true
}

// filelockHost spells a host name as filelock's host_name does: each byte
// outside 0x21-0x7e, and '?', as "?xx"; then, for a process outside the
// initial pid namespace (ns its inode; 0 when unknown, which filelock
// takes as the initial one), filelockNSMark and the inode in hex; "?" for
// an empty one. filelock shortens a spelling longer than 253 characters
// with a SHA-256 digest of its tail; for such a name ok is false. hold does
// not write that form: crypto/sha256 would be initialised at every start
// of the hold command, which keeps crypto out (cmd/hold's TestLinksNoCgo),
// for a name no Linux host has (a host name is at most 64 bytes, 192
// spelled, with a mark of at most 24).
func filelockHost(host string, ns uint64) (name string, ok bool) {
	var b strings.Builder
	for i := 0; i < len(host); i++ {
		if c := host[i]; c >= 0x21 && c <= 0x7e && c != '?' {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "?%02x", c)
		}
	}
	if runtime.GOOS == "linux" && ns != 0 && ns != initialPIDNS {
		b.WriteString(filelockNSMark + strconv.FormatUint(ns, 16))
	}
	name = b.String()
	if len(name) > 253 {
		return "", false
	}
	if name == "" {
		return "?", true
	}
	return name, true
}
