package cli

import (
	"bytes"
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
// forked twice) is re-parented to hold instead of init and stays in
// reach. The command stays in hold's process group, so Ctrl-C on a
// terminal reaches all of it as before, and job control (Ctrl-Z) is
// unchanged.
//
// Orphans that die while the command runs are hold's to reap: on SIGCHLD
// (coalesced, see reapEvery) hold reaps those whose exit nobody else
// waits for, so that a long-running command that leaves many short-lived
// orphans does not fill the process table with zombies.
type tree struct {
	self  int
	child int
	chld  chan os.Signal
}

var subreaper sync.Once

// newTree prepares cmd, before it starts, to be stopped as a whole.
func newTree(*exec.Cmd) *tree {
	subreaper.Do(func() {
		// Without it (a kernel before 3.4) the orphans escape, and the
		// walk finds only the processes whose parents still live.
		unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	})
	t := &tree{self: os.Getpid(), chld: make(chan os.Signal, 1)}
	signal.Notify(t.chld, syscall.SIGCHLD)
	return t
}

// exits receives when a child of hold has exited.
func (t *tree) exits() <-chan os.Signal { return t.chld }

// reapOrphans reaps the orphans that have died, without signalling any
// process.
func (t *tree) reapOrphans() { t.signal(0) }

// close stops watching for exits.
func (t *tree) close() { signal.Stop(t.chld) }

// started records the command's process.
func (t *tree) started(p *os.Process) {
	t.child = p.Pid
}

// signal sends sig (0: none) to every live descendant of hold and reaps
// the orphans that have died (those re-parented to hold; the command
// itself is reaped by its cmd.Wait). It returns how many are alive.
func (t *tree) signal(sig syscall.Signal) int {
	procs := descendants(t.self)
	alive := 0
	for _, p := range procs {
		if p.state == 'Z' || p.state == 'X' {
			if p.ppid == t.self && p.pid != t.child {
				var ws unix.WaitStatus
				unix.Wait4(p.pid, &ws, unix.WNOHANG, nil)
			}
			continue
		}
		alive++
		if sig != 0 {
			unix.Kill(p.pid, sig)
		}
	}
	return alive
}

type procEntry struct {
	pid, ppid int
	state     byte
}

// descendants lists every process whose chain of parents leads to root,
// from /proc. A process forked after the scan is missed by this one and
// found by the next look (stopping looks until none is left).
func descendants(root int) []procEntry {
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
  after --kill-after; hold exits only once none is left.`
