package proc

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// KernelLock is one line of /proc/locks: a lock the kernel holds for a
// process, or a process blocked waiting for one.
type KernelLock struct {
	// Kind is "FLOCK" (flock(2)), "POSIX" (fcntl), "OFDLCK" (open file
	// description locks) or "LEASE".
	Kind string
	// Write: an exclusive (WRITE) lock, else a shared (READ) one.
	Write bool
	// Blocked: the process waits for this lock (a "->" line) and does
	// not hold it.
	Blocked bool
	// PID is the process that took the lock or waits for it; -1 for an
	// OFD lock, which belongs to no process.
	PID int
	// Major, Minor and Inode identify the locked file.
	Major, Minor uint32
	Inode        uint64
}

// FileKey identifies a file the way the kernel's lock table does: its
// device (as unix.Mkdev makes it) and inode number.
type FileKey struct{ Dev, Ino uint64 }

// LockTable is one reading of the kernel's lock table, /proc/locks, indexed
// by file, so that a caller looking at many files finds each one's locks by
// a lookup instead of reading and scanning the table again.
type LockTable struct {
	files map[FileKey][]KernelLock
}

// ReadLockTable reads /proc/locks once and indexes it. Only FLOCK and
// OFDLCK lines are kept: hold's locks and those of the tools it
// interoperates with (flock(1), filelock) are never POSIX locks or leases.
func ReadLockTable() (*LockTable, error) {
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil, err
	}
	return indexLockTable(b), nil
}

// indexLockTable indexes the text of /proc/locks (see parseLockLine).
func indexLockTable(b []byte) *LockTable {
	t := &LockTable{files: map[FileKey][]KernelLock{}}
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if l, ok := parseLockLine(line); ok && (l.Kind == "FLOCK" || l.Kind == "OFDLCK") {
			k := FileKey{unix.Mkdev(l.Major, l.Minor), l.Inode}
			t.files[k] = append(t.files[k], l)
		}
	}
	return t
}

// Locks returns the table's FLOCK and OFDLCK lines for the file k, held
// and blocked.
func (t *LockTable) Locks(k FileKey) []KernelLock {
	if t == nil {
		return nil
	}
	return t.files[k]
}

// Files returns the table's FLOCK and OFDLCK lines by file, to range over
// (not to change).
func (t *LockTable) Files() map[FileKey][]KernelLock {
	if t == nil {
		return nil
	}
	return t.files
}

// Holders returns the pids that hold a FLOCK or OFDLCK lock on the file k
// (see LockHolders), each once; nil when none. A pid can appear on more
// than one line: it holds a shared lock through two descriptions, or the
// kernel, which serves the table a page at a time and finds its place
// again by counting, showed one lock twice because an earlier one went
// away between two reads.
func (t *LockTable) Holders(k FileKey) []int {
	var pids []int
	for _, l := range t.Locks(k) {
		if !l.Blocked && l.PID > 0 && !slices.Contains(pids, l.PID) {
			pids = append(pids, l.PID)
		}
	}
	return pids
}

// parseLockLine parses one line of /proc/locks without allocating, since
// the table lists every lock on the machine and most lines are of no
// interest. It reads "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF", or
// for a blocked waiter "1: -> FLOCK  ADVISORY  WRITE ...".
func parseLockLine(line []byte) (KernelLock, bool) {
	var fs [7][]byte
	n := 0
	for n < len(fs) {
		for len(line) > 0 && (line[0] == ' ' || line[0] == '\t') {
			line = line[1:]
		}
		if len(line) == 0 {
			break
		}
		end := bytes.IndexAny(line, " \t")
		if end < 0 {
			end = len(line)
		}
		fs[n], line = line[:end], line[end:]
		n++
	}
	var l KernelLock
	f := fs[:n]
	if len(f) > 1 && string(f[1]) == "->" {
		l.Blocked = true
		f = f[1:]
	}
	if len(f) < 6 {
		return l, false
	}
	switch string(f[1]) { // no allocation: the compiler compares in place
	case "FLOCK":
		l.Kind = "FLOCK"
	case "OFDLCK":
		l.Kind = "OFDLCK"
	case "POSIX":
		l.Kind = "POSIX"
	case "LEASE":
		l.Kind = "LEASE"
	default:
		l.Kind = string(f[1])
	}
	l.Write = string(f[3]) == "WRITE"
	pid, err := strconv.Atoi(string(f[4]))
	if err != nil {
		return l, false
	}
	l.PID = pid
	id := f[5]
	i := bytes.IndexByte(id, ':')
	j := bytes.LastIndexByte(id, ':')
	if i < 0 || j <= i {
		return l, false
	}
	major, err1 := strconv.ParseUint(string(id[:i]), 16, 32)
	minor, err2 := strconv.ParseUint(string(id[i+1:j]), 16, 32)
	ino, err3 := strconv.ParseUint(string(id[j+1:]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return l, false
	}
	l.Major, l.Minor, l.Inode = uint32(major), uint32(minor), ino
	return l, true
}

// shared is the lock table ShareLockTable lends to LockHolders and
// SharedLockTable, read at the first question and kept until released;
// it also keeps the command lines Cmdline read meanwhile.
var shared struct {
	sync.Mutex
	users    int
	table    *LockTable
	err      error
	read     bool
	cmdlines map[int]string
	// descs is the descriptor index (fdindex_linux.go), made at the
	// first keeper question.
	descs *descIndex
}

// ShareLockTable lets one call that inspects many locks (hold ls, hold
// status) read the kernel's lock table once: until release is called,
// LockHolders and SharedLockTable answer from one reading, taken at the
// first question (so a call that meets no held lock reads nothing),
// Cmdline reads each process's command line once, and Keeps, FlockKeepers
// and Openers read each process's descriptors once (fdindex_linux.go). The table lists every
// lock on the machine and costs the kernel time in proportion to all of
// them, so reading it again for every held lock made a listing quadratic.
// The answers are a snapshot, as a listing is.
func ShareLockTable() (release func()) {
	shared.Lock()
	shared.users++
	if shared.users == 1 {
		shared.cmdlines = map[int]string{}
	}
	shared.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			shared.Lock()
			defer shared.Unlock()
			shared.users--
			if shared.users == 0 {
				shared.table, shared.err, shared.read, shared.cmdlines, shared.descs = nil, nil, false, nil, nil
			}
		})
	}
}

// SharedLockTable returns the table ShareLockTable shares, reading it at
// the first call; outside ShareLockTable it reads a new one every time.
func SharedLockTable() (*LockTable, error) {
	shared.Lock()
	defer shared.Unlock()
	if shared.users == 0 {
		return ReadLockTable()
	}
	if !shared.read {
		shared.table, shared.err = ReadLockTable()
		shared.read = true
	}
	return shared.table, shared.err
}

// sharedCmdline returns the command line of pid kept while a table is
// shared, and whether one was.
func sharedCmdline(pid int) (string, bool) {
	shared.Lock()
	defer shared.Unlock()
	c, ok := shared.cmdlines[pid]
	return c, ok
}

// keepCmdline keeps the command line of pid while a table is shared.
func keepCmdline(pid int, c string) {
	shared.Lock()
	defer shared.Unlock()
	if shared.cmdlines != nil {
		shared.cmdlines[pid] = c
	}
}
