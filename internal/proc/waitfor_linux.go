package proc

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The facts hold's deadlock check with an ancestor decides by (see
// internal/deadlock/ancestor.go): which processes keep a kernel lock, and
// whether a process is blocked waiting for its only child.

// SoleChildWaiter reports whether process pid is asleep in a wait for a
// child to end and has exactly one child, counting one that has ended and
// is not yet reaped, and returns that child. Asleep in a wait: one of its
// threads blocked in wait4 or waitid (a shell running a command in the
// foreground, bash's wait, flock(1), hold run), or its only thread in
// sigsuspend (dash's wait builtin, which sleeps until SIGCHLD). A process
// that waits so does nothing else before that child ends, short of a
// signal from outside. ok is false when either cannot be told (the
// process is gone, or this one may not look at it).
func SoleChildWaiter(pid int) (child int, ok bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, false
	}
	waiting := false
	var kids []int
	for _, t := range tasks {
		if b, err := os.ReadFile(dir + "/" + t.Name() + "/wchan"); err == nil {
			w := string(bytes.TrimSpace(b))
			waiting = waiting || isWaitChannel(w) || len(tasks) == 1 && strings.HasPrefix(w, "sigsuspend")
		}
		b, err := os.ReadFile(dir + "/" + t.Name() + "/children")
		if err != nil {
			if os.IsNotExist(err) {
				// No children files in this kernel: find them by
				// their parents.
				kids = childrenByScan(pid)
				break
			}
			return 0, false
		}
		for _, f := range bytes.Fields(b) {
			if c, err := strconv.Atoi(string(f)); err == nil && !slices.Contains(kids, c) {
				kids = append(kids, c)
			}
		}
	}
	if !waiting || len(kids) != 1 {
		return 0, false
	}
	return kids[0], true
}

// isWaitChannel reports whether a thread's wchan is the kernel's wait for
// a child (do_wait, under wait4, waitid and waitpid).
func isWaitChannel(w string) bool {
	return w == "do_wait" || strings.HasPrefix(w, "do_wait.")
}

// childrenByScan lists the processes whose parent is pid, from every
// process's stat.
func childrenByScan(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var kids []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil || n <= 0 {
			continue
		}
		if p, ok := parentOf(n); ok && p == pid {
			kids = append(kids, n)
		}
	}
	return kids
}

// Threads returns the number of threads of process pid, 0 when unknown.
func Threads(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(line, []byte("Threads:")); ok {
			n, _ := strconv.Atoi(string(bytes.TrimSpace(v)))
			return n
		}
	}
	return 0
}

// FlockKeepers returns the processes that keep a flock(2) lock on the
// file k: those with a descriptor open on an open file description that
// holds such a lock on it. The kernel's lock belongs to the open file
// description, not to a process: it lasts while any descriptor of it is
// open, and any process with one can unlock it (flock -u). /proc/locks
// names only the process that took it, which may have closed its
// descriptor or ended since (`( flock -n 9 ) 9>F`: the subshell keeps the
// lock); the fdinfo of each descriptor lists the locks of its own
// description, which finds them all.
//
// unknown lists the processes that might keep one but could not be
// looked at: those whose descriptors this process may not read although
// their real or saved user id is this process's user (a set-user-ID
// program started with an inherited descriptor, or one that made itself
// undumpable). Another user's processes are not listed: they could have a
// description of this process's only by being passed it over a socket.
// It reads every process's descriptor table: for rare questions (a lock
// held by an ancestor, a holder whose recorded pid is gone), never a hot
// path. Within ShareLockTable it answers from the descriptor index
// (fdindex_linux.go).
func FlockKeepers(k FileKey) (pids, unknown []int) {
	if x := sharedDescs(); x != nil {
		return x.flockKeepers(k)
	}
	counted("/proc")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, nil
	}
	uid := os.Getuid()
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		kept, readable := keeps("/proc/"+e.Name(), k, 0)
		if kept {
			pids = append(pids, pid)
		} else if !readable && uid != 0 && mayShareUser(pid, uid) {
			unknown = append(unknown, pid)
		}
	}
	return pids, unknown
}

// DescendsFrom reports whether process pid is one of roots or descends
// from one of them, by its chain of parents as it is now.
func DescendsFrom(pid int, roots []int) bool {
	for range 64 { // a bound against a loop, should /proc be odd
		if slices.Contains(roots, pid) {
			return true
		}
		next, ok := parentOf(pid)
		if !ok || next <= 0 || next == pid {
			return false
		}
		pid = next
	}
	return false
}

// keepsFlock reports whether the fdinfo file at path lists a FLOCK lock
// (held, not waited for: fdinfo lists only held ones) on the file k.
func keepsFlock(path string, k FileKey) bool { return keepsFlockMode(path, k, false) }

// keepsFlockMode is keepsFlock, for an exclusive (WRITE) lock only when
// writers is set.
func keepsFlockMode(path string, k FileKey, writers bool) bool {
	counted(path)
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte("lock:"))
		if !ok {
			continue
		}
		// "lock:\t1: FLOCK  ADVISORY  WRITE 4242 fe:00:1234 0 EOF":
		// the same fields as a line of /proc/locks.
		if l, ok := parseLockLine(rest); ok && l.Kind == "FLOCK" && !l.Blocked && (l.Write || !writers) &&
			unix.Mkdev(l.Major, l.Minor) == k.Dev && l.Inode == k.Ino {
			return true
		}
	}
	return false
}

// mayShareUser reports whether process pid's real or saved user id is
// uid (or cannot be read).
func mayShareUser(pid, uid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return !os.IsNotExist(err)
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(line, []byte("Uid:")); ok {
			f := bytes.Fields(v)
			u := strconv.Itoa(uid)
			return len(f) < 3 || string(f[0]) == u || string(f[2]) == u
		}
	}
	return true
}

// FileKeyOf returns the FileKey of the file at path (following symlinks).
func FileKeyOf(path string) (FileKey, bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return FileKey{}, false
	}
	return FileKey{uint64(st.Dev), st.Ino}, true
}

// Keeps reports whether process pid keeps a flock(2) lock on the file k
// (see FlockKeepers), by its own descriptors alone (within
// ShareLockTable, read once for every question).
func Keeps(pid int, k FileKey) bool {
	if x := sharedDescs(); x != nil {
		return x.of(pid).keepsIn("/proc/"+strconv.Itoa(pid), k)
	}
	kept, _ := keeps("/proc/"+strconv.Itoa(pid), k, 0)
	return kept
}

// keeps reports whether the process whose /proc directory is dir keeps a
// flock(2) lock on k, and whether its descriptors could be read. One
// fstatat per descriptor, relative to the fd directory, and one fdinfo
// read for a descriptor of the file: a busy lock's error asks it. A
// process with more than limit descriptors (0: no limit) is not looked
// through: readable is then false.
func keeps(dir string, k FileKey, limit int) (kept, readable bool) {
	counted(dir + "/fd")
	d, err := os.Open(dir + "/fd")
	if err != nil {
		return false, os.IsNotExist(err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil || limit > 0 && len(names) > limit {
		return false, false
	}
	dfd := int(d.Fd())
	for _, name := range names {
		counted(dir + "/fd/" + name)
		var st unix.Stat_t
		if unix.Fstatat(dfd, name, &st, 0) == nil && uint64(st.Dev) == k.Dev && st.Ino == k.Ino &&
			keepsFlock(dir+"/fdinfo/"+name, k) {
			return true, true
		}
	}
	return false, true
}

// LockKeepers returns the processes that keep a flock(2) lock on the file
// open as fd: the pids /proc/locks lists (LockHolders), unless one of them
// no longer keeps it (it ended, or closed its descriptor, while a child
// or the shell that lent it the descriptor keeps the lock), in which case
// those found by FlockKeepers, this process left out unless it alone
// keeps it. Nil when none is found.
func LockKeepers(fd uintptr) []int {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd), &st); err != nil {
		return nil
	}
	k := FileKey{uint64(st.Dev), st.Ino}
	pids := LockHolders(fd)
	for _, pid := range pids {
		if !Keeps(pid, k) {
			if keepers, _ := FlockKeepers(k); len(keepers) > 0 {
				// This process, when it inherited the descriptor too
				// (a command the keeper started asks), is named only
				// when nothing else keeps the lock.
				if others := slices.DeleteFunc(slices.Clone(keepers), func(p int) bool { return p == os.Getpid() }); len(others) > 0 {
					return others
				}
				return keepers
			}
			break
		}
	}
	return pids
}

// KeepsFile is Keeps for the file open as fd; true when it cannot be
// told (fd cannot be examined, pid's descriptors may not be read, or it
// has more than keepsFileLimit of them, too many to look through on every
// busy try), so that a caller trusting a record on its word goes on doing
// so.
func KeepsFile(pid int, fd uintptr) bool {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd), &st); err != nil {
		return true
	}
	dir := "/proc/" + strconv.Itoa(pid)
	kept, readable := keeps(dir, FileKey{uint64(st.Dev), st.Ino}, keepsFileLimit)
	if !readable {
		_, err := os.Stat(dir)
		return err == nil
	}
	return kept
}

// keepsFileLimit bounds the descriptors KeepsFile looks through.
const keepsFileLimit = 256

// HeldExclusive reports whether /proc/locks, read now, lists an
// exclusive (WRITE) FLOCK or OFDLCK lock held on the file k.
func HeldExclusive(k FileKey) bool {
	t, err := ReadLockTable()
	if err != nil {
		return false
	}
	return slices.ContainsFunc(t.Locks(k), func(l KernelLock) bool { return l.Write && !l.Blocked })
}

// KernelHolders returns the pids /proc/locks lists as holding a FLOCK or
// OFDLCK lock on the file k (see LockHolders).
func KernelHolders(k FileKey) []int {
	t, err := SharedLockTable()
	if err != nil {
		return nil
	}
	return t.Holders(k)
}

// WaitingAncestors returns the ancestors of process pid that can do
// nothing before it ends, nearest first: its parent when that is asleep
// in a wait for its only child (SoleChildWaiter), pid, then that one's
// parent likewise, and so on up to the first that is not. A lock such an
// ancestor keeps (hold run's, flock(1)'s) is kept until pid ends.
func WaitingAncestors(pid int) []int {
	var chain []int
	for child := pid; len(chain) < 64; { // a bound against a loop, should /proc be odd
		parent, ok := parentOf(child)
		if !ok || parent <= 1 || parent == child {
			break
		}
		if kid, ok := SoleChildWaiter(parent); !ok || kid != child {
			break
		}
		chain = append(chain, parent)
		child = parent
	}
	return chain
}

// CaughtSignals returns the set of signals process pid handles with a
// handler of its own (SigCgt in /proc/PID/status: bit N-1 for signal N);
// ok is false when it cannot be read. A shell that runs a trap, or a
// program like timeout(1) that acts on a timer's signal, shows it here.
func CaughtSignals(pid int) (set uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if v, found := bytes.CutPrefix(line, []byte("SigCgt:")); found {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 16, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// OwnKeeps returns the descriptors of this process that keep a flock(2)
// lock on the file k, an exclusive one only when writers is set: for the
// question whether this process holds, through a descriptor it was
// started with, a lock it now waits for.
func OwnKeeps(k FileKey, writers bool) []int {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil
	}
	var out []int
	for _, name := range names {
		fd, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(int(d.Fd()), name, &st, 0) == nil && uint64(st.Dev) == k.Dev && st.Ino == k.Ino &&
			keepsFlockMode("/proc/self/fdinfo/"+name, k, writers) {
			out = append(out, fd)
		}
	}
	slices.Sort(out)
	return out
}
