package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// tree is every process the command started, found on Linux as hold's
// descendants. hold makes itself a child subreaper (PR_SET_CHILD_SUBREAPER)
// before it starts the command, so a process whose parent exits (the
// writer of `sh -c 'writer; echo done'` once sh is killed, a daemon that
// forked twice, each step of a process that forks a copy of itself and
// exits) is re-parented to hold instead of init and stays in reach. The
// command stays in hold's process group, so Ctrl-C on a terminal reaches
// all of it as before, and job control (Ctrl-Z) is unchanged.
//
// Because of that, hold has a live descendant exactly when it still has a
// child, and the kernel says when it has none (wait4 fails with ECHILD):
// that, never a scan of the process table, is what tells hold that the
// command is gone (see none). A scan only finds whom to signal, and one
// that misses a process forked meanwhile costs another sweep, not a
// process left running.
//
// Orphans that die while the command runs are hold's to reap: on SIGCHLD
// (coalesced, see reapEvery) hold reaps those whose exit nobody else
// waits for, so that a long-running command that leaves many short-lived
// orphans does not fill the process table with zombies.
type tree struct {
	self  int
	child *os.Process
	chld  chan os.Signal
	// before are the children hold had before it started the command:
	// the background jobs of a shell that exec'd hold. They are not the
	// command's, and are neither signalled nor waited for.
	before map[int]bool
	// lists is whether the kernel lists each task's children
	// (/proc/PID/task/TID/children); without it the whole process table
	// is scanned.
	lists bool
	// reaper is whether hold is the child subreaper; without it (a
	// kernel before 3.4) orphans go to init and only a scan finds them.
	reaper bool
}

var (
	subreaper   sync.Once
	subreaperOK bool
)

// newTree prepares cmd, before it starts, to be stopped as a whole.
func newTree(*exec.Cmd) *tree {
	subreaper.Do(func() {
		subreaperOK = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == nil
	})
	t := &tree{self: os.Getpid(), chld: make(chan os.Signal, 1), before: map[int]bool{}, reaper: subreaperOK}
	t.lists = childLists()
	if t.lists {
		kids, _ := kernelChildren(t.self)
		for _, pid := range kids {
			t.before[pid] = true
		}
	} else {
		for _, p := range descendants(t.self, nil) {
			if p.ppid == t.self {
				t.before[p.pid] = true
			}
		}
	}
	signal.Notify(t.chld, syscall.SIGCHLD)
	return t
}

// exits receives when a child of hold has exited.
func (t *tree) exits() <-chan os.Signal { return t.chld }

// close stops watching for exits.
func (t *tree) close() { signal.Stop(t.chld) }

// started records the command's process.
func (t *tree) started(p *os.Process) { t.child = p }

// reapOrphans reaps the orphans that have died (those re-parented to
// hold; the command itself is reaped by its cmd.Wait), without signalling
// any process.
func (t *tree) reapOrphans() {
	if !t.lists {
		t.scan(0, nil)
		return
	}
	kids, _ := kernelChildren(t.self)
	for _, pid := range kids {
		if pid == t.child.Pid {
			continue
		}
		if p, ok := readStat(pid); ok && (p.state == 'Z' || p.state == 'X') {
			t.reap(pid)
		}
	}
}

// signal sends sig (0: none) to every live process of the command, once
// each, and returns how many it found. Each process is signalled before
// its children are listed, so that one signalled while it forks either
// fails to fork or has its child listed already; the passes go on until
// one finds no process that an earlier one had not signalled (the
// children of a process that exits meanwhile are hold's by the next pass,
// and a process that forks and exits at once keeps ahead of one pass but
// not of the next). The number of passes is bounded: for SIGKILL this is a
// sweep, repeated at every look until the kernel says that nothing of the
// command is left (none), not the judge of that.
func (t *tree) signal(sig syscall.Signal) int {
	if sig == 0 {
		if !t.lists {
			return t.scan(0, nil)
		}
		n, _ := t.walk(0, nil)
		return n
	}
	seen := map[int]bool{}
	total := 0
	for range signalPasses {
		var fresh int
		if t.lists {
			_, fresh = t.walk(sig, seen)
		} else {
			fresh = t.scan(sig, seen)
		}
		total += fresh
		if fresh == 0 {
			break
		}
	}
	return total
}

// signalPasses bounds the passes of one signal.
const signalPasses = 64

// kill sends SIGKILL to every process of the command and returns how many
// live ones it found (see signal). A process SIGKILL reaches never runs
// again, so it cannot fork once killed.
func (t *tree) kill() int { return t.signal(unix.SIGKILL) }

// terminate sends sig (SIGTERM, SIGHUP, ...) to every live process of the
// command, once each, and returns how many it found.
func (t *tree) terminate(sig os.Signal) int {
	s, ok := sig.(syscall.Signal)
	if !ok {
		s = syscall.SIGTERM
	}
	return t.signal(s)
}

// alive returns how many processes of the command a look finds alive.
// It is a count for messages; none says whether any is left.
func (t *tree) alive() int { return t.signal(0) }

// none reports whether no process of the command is left, once the
// command itself has been reaped (cmd.Wait returned): hold then reaps
// every child it has and asks the kernel whether it has any left. As
// their subreaper, hold has a live descendant exactly when it has a
// child, so ECHILD means that nothing of the command runs.
func (t *tree) none() bool {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ECHILD):
			// Without the subreaper, orphans went to init: only a
			// look can tell.
			return t.reaper || t.signal(0) == 0
		case err != nil:
			return false
		case pid > 0:
			delete(t.before, pid)
			continue
		}
		// Children left, none of them dead: the command's, unless only
		// the shell's jobs from before it are.
		return len(t.before) > 0 && t.signal(0) == 0
	}
}

// walk sends sig (0: none) to every live process of the command, from
// hold's children down, and reaps the dead orphans it meets. seen, when
// not nil, holds the processes an earlier pass signalled already, which
// walk does not signal again; it adds those it signals. It returns how
// many live processes it found and how many of them were not in seen.
func (t *tree) walk(sig syscall.Signal, seen map[int]bool) (live, fresh int) {
	queue, _ := kernelChildren(t.self)
	top := len(queue)
	for i := 0; i < len(queue); i++ {
		pid := queue[i]
		if i < top && t.before[pid] {
			continue
		}
		// The state first: once signalled (SIGKILL) a process may be a
		// zombie before the next read.
		p, ok := readStat(pid)
		if !ok {
			continue // gone: reaped already, its children re-parented
		}
		if p.state == 'Z' || p.state == 'X' {
			// Its children have been re-parented to hold already.
			if i < top && pid != t.child.Pid {
				t.reap(pid)
			}
			continue
		}
		live++
		// Signalled before its children are listed, so that one it
		// forks meanwhile is listed too (see signal); once only.
		if seen == nil || !seen[pid] {
			if sig != 0 {
				t.send(pid, sig)
			}
			if seen != nil {
				seen[pid] = true
				fresh++
			}
		}
		kids, _ := kernelChildren(pid)
		queue = append(queue, kids...)
	}
	return live, fresh
}

// reap reaps hold's dead child pid, which was not the command itself. Its
// pid may be given to a process of the command next, so it is no longer
// one of the children from before.
func (t *tree) reap(pid int) {
	var ws unix.WaitStatus
	if got, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got == pid {
		delete(t.before, pid)
	}
}

// send signals one process. The command itself is signalled through its
// os.Process, which cannot reach another process that got its pid once it
// is reaped.
func (t *tree) send(pid int, sig syscall.Signal) {
	if t.child != nil && pid == t.child.Pid {
		t.child.Signal(sig)
		return
	}
	unix.Kill(pid, sig)
}

// kernelChildren lists the children of every thread of process pid, as the
// kernel keeps them (/proc/PID/task/TID/children; see childLists). ok is
// false when the process is gone.
func kernelChildren(pid int) (kids []int, ok bool) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return nil, false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(dir + task.Name() + "/children")
		if err != nil {
			continue // the thread ended meanwhile
		}
		for _, f := range bytes.Fields(b) {
			if c, err := strconv.Atoi(string(f)); err == nil {
				kids = append(kids, c)
			}
		}
	}
	return kids, true
}

// childLists reports whether the kernel lists each task's children
// (built with CONFIG_PROC_CHILDREN, as the common distributions are).
func childLists() bool {
	_, err := os.Stat("/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/children")
	return err == nil
}

// scan is signal without the kernel's lists of children: every
// process of the table whose chain of parents leads to hold, from one
// pass over /proc, which misses a process forked during it (the next
// sweep finds it). seen, when not nil, collects the processes signalled.
func (t *tree) scan(sig syscall.Signal, seen map[int]bool) int {
	alive := 0
	for _, p := range descendants(t.self, t.before) {
		if p.state == 'Z' || p.state == 'X' {
			if p.ppid == t.self && (t.child == nil || p.pid != t.child.Pid) {
				t.reap(p.pid)
			}
			continue
		}
		if seen != nil && seen[p.pid] {
			continue
		}
		alive++
		if sig != 0 {
			t.send(p.pid, sig)
		}
		if seen != nil {
			seen[p.pid] = true
		}
	}
	return alive
}

type procEntry struct {
	pid, ppid int
	state     byte
}

// descendants lists every process whose chain of parents leads to root,
// skipping root's children in skip and their descendants, from /proc.
func descendants(root int, skip map[int]bool) []procEntry {
	dir, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]procEntry{}
	for _, e := range dir {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		p, ok := readStat(pid)
		if !ok {
			continue
		}
		children[p.ppid] = append(children[p.ppid], p)
	}
	var out []procEntry
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if pid == root && skip[c.pid] {
				continue
			}
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// readStat reads a process's state and parent from /proc/PID/stat. The
// command name may hold spaces and parentheses, so the fields are counted
// from the last ')'.
func readStat(pid int) (procEntry, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procEntry{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procEntry{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return procEntry{}, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	if err != nil {
		return procEntry{}, false
	}
	return procEntry{pid: pid, ppid: ppid, state: f[0][0]}, true
}

const treeHelp = `  On loss of the lock, and on SIGTERM, hold stops every process the
  command started, those started in the background included (hold is
  their child subreaper, so orphans stay in reach): SIGTERM, then SIGKILL
  after --kill-after, again and again until none is left. hold exits, and
  lets go of its lock, only once the kernel says that it has no child
  left, so a process that forks a copy of itself and exits, or a
  supervisor that restarts its worker on SIGTERM, does not outlive it.`
