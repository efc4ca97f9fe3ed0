package proc

import (
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// A listing asks, for every held lock, which processes keep it: the
// holder the kernel's table names must still have the file open with the
// lock (Keeps), and when it does not, or a report wants every opener,
// every process's descriptors are searched (FlockKeepers, Openers).
// Asked lock by lock, each question reads the descriptors of a process
// again: one process holding 5,000 locks through 5,000 descriptors made
// `hold ls` stat 12.5 million of them. Within ShareLockTable, the
// questions are answered from a descriptor index instead: each process's
// /proc/PID/fd is read and each of its descriptors stat'ed once per
// listing, and a file's keepers are found by a lookup. Only a descriptor
// of the file asked about has its fdinfo read (whether its open file
// description holds the lock), once per question, as before. The index is
// a snapshot, as the shared lock table is; this process's own descriptors,
// which the listing itself opens and closes, are always read afresh.

// descIndex is the descriptor index of one ShareLockTable.
type descIndex struct {
	mu sync.Mutex
	// procs are the processes indexed so far, by pid.
	procs map[int]*procDescs
	// whole: every process in /proc is indexed; order lists them as
	// /proc did, byKey the pids with a descriptor on each file (in that
	// order), and unknown those FlockKeepers reports it cannot look at.
	whole   bool
	order   []int
	byKey   map[FileKey][]int
	unknown []int
}

// procDescs is one process's descriptors, by the file they are open on.
type procDescs struct {
	// readable: its descriptors could be listed (see keeps).
	readable bool
	names    map[FileKey][]string
	// flocks caches what keepsIn found in a descriptor's fdinfo: a
	// listing asks about a held lock more than once (its state, then
	// its holder).
	mu     sync.Mutex
	flocks map[string]bool
}

// readHook, when set, is called with every /proc path that the keeper
// questions read or stat (see CountReads).
var readHook atomic.Pointer[func(path string)]

// CountReads calls f with every /proc path the keeper questions (Keeps,
// FlockKeepers, Openers, LockKeepers) read, list or stat, until restore is
// called: how tests tell that a listing reads each descriptor once rather
// than once per lock, by counts rather than by time. Not for concurrent
// use by several tests.
func CountReads(f func(path string)) (restore func()) {
	readHook.Store(&f)
	return func() { readHook.Store(nil) }
}

// counted tells the read hook, if any, that path is read.
func counted(path string) {
	if h := readHook.Load(); h != nil {
		(*h)(path)
	}
}

// sharedDescs returns the descriptor index of the current ShareLockTable,
// nil outside one.
func sharedDescs() *descIndex {
	shared.Lock()
	defer shared.Unlock()
	if shared.users == 0 {
		return nil
	}
	if shared.descs == nil {
		shared.descs = &descIndex{procs: map[int]*procDescs{}}
	}
	return shared.descs
}

// readDescs lists the descriptors of the process whose /proc directory is
// dir and stats each once (following it to the open file, as keeps does).
func readDescs(dir string) *procDescs {
	p := &procDescs{names: map[FileKey][]string{}}
	counted(dir + "/fd")
	d, err := os.Open(dir + "/fd")
	if err != nil {
		// A process that has ended has nothing to keep: as keeps, it
		// counts as read.
		p.readable = os.IsNotExist(err)
		return p
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return p
	}
	p.readable = true
	dfd := int(d.Fd())
	for _, name := range names {
		counted(dir + "/fd/" + name)
		var st unix.Stat_t
		if unix.Fstatat(dfd, name, &st, 0) == nil {
			k := FileKey{uint64(st.Dev), st.Ino}
			p.names[k] = append(p.names[k], name)
		}
	}
	return p
}

// keepsIn reports whether one of p's descriptors on k holds a flock(2)
// lock on it, by their fdinfo.
func (p *procDescs) keepsIn(dir string, k FileKey) bool {
	for _, name := range p.names[k] {
		p.mu.Lock()
		kept, known := p.flocks[name]
		p.mu.Unlock()
		if !known {
			kept = keepsFlock(dir+"/fdinfo/"+name, k)
			p.mu.Lock()
			if p.flocks == nil {
				p.flocks = map[string]bool{}
			}
			p.flocks[name] = kept
			p.mu.Unlock()
		}
		if kept {
			return true
		}
	}
	return false
}

// of returns the descriptors of pid, read at the first question; this
// process's are read at every question.
func (x *descIndex) of(pid int) *procDescs {
	dir := "/proc/" + strconv.Itoa(pid)
	if pid == os.Getpid() {
		return readDescs(dir)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	p, ok := x.procs[pid]
	if !ok {
		p = readDescs(dir)
		x.procs[pid] = p
	}
	return p
}

// indexAll indexes every process at the first question that needs them
// all.
func (x *descIndex) indexAll() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.whole {
		return
	}
	x.whole = true
	x.byKey = map[FileKey][]int{}
	counted("/proc")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self, uid := os.Getpid(), os.Getuid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		x.order = append(x.order, pid)
		if pid == self {
			continue
		}
		p, ok := x.procs[pid]
		if !ok {
			p = readDescs("/proc/" + e.Name())
			x.procs[pid] = p
		}
		for k := range p.names {
			x.byKey[k] = append(x.byKey[k], pid)
		}
		if !p.readable && uid != 0 && mayShareUser(pid, uid) {
			x.unknown = append(x.unknown, pid)
		}
	}
}

// flockKeepers is FlockKeepers from the index: the processes with a
// descriptor on k are looked up (this one's read afresh), in /proc's order.
func (x *descIndex) flockKeepers(k FileKey) (pids, unknown []int) {
	x.indexAll()
	self := os.Getpid()
	x.mu.Lock()
	var candidates []*procDescs
	var order []int
	for _, pid := range x.order {
		if pid == self || slices.Contains(x.byKey[k], pid) {
			order = append(order, pid)
			candidates = append(candidates, x.procs[pid])
		}
	}
	unknown = slices.Clone(x.unknown)
	x.mu.Unlock()
	for i, pid := range order {
		p := candidates[i]
		if pid == self {
			p = x.of(self)
		}
		if p.keepsIn("/proc/"+strconv.Itoa(pid), k) {
			pids = append(pids, pid)
		}
	}
	return pids, unknown
}

// openers returns the processes other than this one with a descriptor
// open on k, from the index.
func (x *descIndex) openers(k FileKey) []int {
	x.indexAll()
	x.mu.Lock()
	defer x.mu.Unlock()
	return slices.Clone(x.byKey[k])
}

// Openers returns the processes other than this one that have a
// descriptor open on the file k, lock or no lock: the way lsof finds who
// has a file open, by every process's /proc/PID/fd (within ShareLockTable,
// from its descriptor index). Processes whose descriptors this process may
// not read are missed.
func Openers(k FileKey) []int {
	if x := sharedDescs(); x != nil {
		return x.openers(k)
	}
	counted("/proc")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var found []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 || pid == self {
			continue
		}
		if len(readDescs("/proc/" + e.Name()).names[k]) > 0 {
			found = append(found, pid)
		}
	}
	return found
}
