//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	gofrs "github.com/gofrs/flock"
	"github.com/rogpeppe/go-internal/lockedfile"
	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold"
)

// An impl is one way of taking the lock. cycle takes the lock, runs cs
// while holding it, and releases it. It returns when it asked for the lock
// (start), when it got it (got) and when the release returned (done), so
// the worker can tell waiting from holding.
type impl struct {
	name string
	// about is the table's one-line description.
	about string
	// perProcess marks the CLI path: every acquisition is a new process,
	// so the suite runs far fewer of them.
	perProcess bool
	// node, when set, runs the workers in Node (bench/node/worker.js) in
	// this mode instead of this program; cycle is then unused.
	node string
	// python, when set, runs the workers in Python (bench/python/worker.py)
	// in this mode instead of this program; cycle is then unused.
	python string
	cycle  func(w *workerEnv) (cycleTimes, error)
}

// cycleTimes is one acquisition: when the worker asked for the lock
// (start), got it (got), began to release it (releasing: the critical
// section is done) and when the release returned (done).
type cycleTimes struct {
	start, got, releasing, done time.Time
}

// workerEnv is what a worker needs for one cycle.
type workerEnv struct {
	lock    string // the lock path ("<target>.lock")
	target  string // the target the hold implementations are given
	counter *os.File
	self    string // this executable, for the flock(1) child
	cpath   string // the counter's path, for the flock(1) child
}

// impls lists every implementation in table order.
func impls() []impl {
	list := []impl{
		{name: "hold", about: "hold.Acquire / Release, kernel lock (default)", cycle: holdCycle()},
		{name: "hold fair", about: "hold.Acquire with hold.Fair()", cycle: holdCycle(hold.Fair())},
	}
	if off, ok := searchOffOption(); ok {
		list = append(list,
			impl{name: "hold search off", about: "hold.Acquire with hold.DeadlockAfter(0): no deadlock search, to compare hold's rows with", cycle: holdCycle(off)},
			impl{name: "hold holding another", about: "hold.Acquire by a worker that holds a lock of its own meanwhile, so that each wait is watched for a deadlock", cycle: holdHoldingCycle()})
	}
	if opts := portableOptions(); opts != nil {
		list = append(list, impl{name: "hold portable", about: "hold's portable directory protocol", cycle: holdCycle(opts...)})
	}
	list = append(list,
		impl{name: "flock(2)", about: "open + flock(LOCK_EX) + unlock + close per acquisition", cycle: rawFlockCycle},
		impl{name: "gofrs/flock", about: "github.com/gofrs/flock v0.13, New + Lock + Unlock per acquisition", cycle: gofrsCycle},
		impl{name: "lockedfile", about: "go-internal lockedfile.MutexAt(...).Lock()", cycle: lockedfileCycle},
		impl{name: "flock(1)", about: "flock(1) running a child process per acquisition", perProcess: true, cycle: flockCLICycle},
		impl{name: "proper-lockfile seed", about: "Node, proper-lockfile 4.1.2 lockSync, 25 ms sleep when busy (the seed's named lock)", node: "seed"},
		impl{name: "proper-lockfile retry", about: "Node, proper-lockfile 4.1.2 lock() retrying after 1 ms × 1.3ⁿ, randomized, at most 20 ms", node: "retry"},
		impl{name: "hold (Node)", about: "Node, @hold-dev/hold (js/) lock() + release() through its hold agent, kernel lock", node: nodeHoldMode},
		impl{name: "hold (Node sync)", about: "Node, @hold-dev/hold (js/) lockSync() + releaseSync(), the same agent's synchronous channel, kernel lock", node: nodeHoldSyncMode},
		impl{name: "proper-lockfile drop-in seed", about: "Node, proper-lockfile seed's code with its import switched to @hold-dev/hold/proper-lockfile (js/): lockSync + release, the portable protocol's <file>.lock directory", node: nodeDropInSeedMode},
		impl{name: "filelock", about: "Python, py-filelock FileLock (default settings: a busy lock is retried every 50 ms), acquire + release", python: "filelock"},
		impl{name: "hold (Python)", about: "Python, hold-lock (python/) hold.lock() + release() through its hold agent, kernel lock", python: pythonHoldMode},
		impl{name: "hold.filelock", about: "Python, filelock's FileLock code with its import switched to hold.filelock (python/): acquire + release, the same kernel lock through the hold agent", python: pythonDropInMode},
	)
	return list
}

func holdCycle(opts ...hold.Option) func(w *workerEnv) (cycleTimes, error) {
	ctx := context.Background()
	return func(w *workerEnv) (t cycleTimes, err error) {
		t.start = time.Now()
		l, err := hold.Acquire(ctx, w.target, opts...)
		if err != nil {
			return
		}
		t.got = time.Now()
		err = criticalSection(w.counter)
		t.releasing = time.Now()
		if rerr := l.Release(); err == nil {
			err = rerr
		}
		t.done = time.Now()
		return
	}
}

// holdHoldingCycle is holdCycle in a worker that holds a lock of its own
// (beside the lock path, one per process) from its first cycle on: a
// process that holds a lock could close a cycle of waits, so each of its
// waits is watched (hold.DeadlockAfter), which the other hold rows' are
// not.
func holdHoldingCycle() func(w *workerEnv) (cycleTimes, error) {
	cycle := holdCycle()
	var own *hold.Lock
	return func(w *workerEnv) (cycleTimes, error) {
		if own == nil {
			l, err := hold.Acquire(context.Background(), fmt.Sprintf("%s.own-%d", w.target, os.Getpid()))
			if err != nil {
				return cycleTimes{}, err
			}
			own = l
		}
		return cycle(w)
	}
}

func rawFlockCycle(w *workerEnv) (t cycleTimes, err error) {
	t.start = time.Now()
	fd, err := unix.Open(w.lock, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return
	}
	for {
		if err = unix.Flock(fd, unix.LOCK_EX); err != unix.EINTR {
			break
		}
	}
	if err != nil {
		unix.Close(fd)
		return
	}
	t.got = time.Now()
	err = criticalSection(w.counter)
	t.releasing = time.Now()
	unix.Flock(fd, unix.LOCK_UN)
	unix.Close(fd)
	t.done = time.Now()
	return
}

func gofrsCycle(w *workerEnv) (t cycleTimes, err error) {
	t.start = time.Now()
	f := gofrs.New(w.lock)
	if err = f.Lock(); err != nil {
		return
	}
	t.got = time.Now()
	err = criticalSection(w.counter)
	t.releasing = time.Now()
	if uerr := f.Unlock(); err == nil {
		err = uerr
	}
	t.done = time.Now()
	return
}

func lockedfileCycle(w *workerEnv) (t cycleTimes, err error) {
	t.start = time.Now()
	unlock, err := lockedfile.MutexAt(w.lock).Lock()
	if err != nil {
		return
	}
	t.got = time.Now()
	err = criticalSection(w.counter)
	t.releasing = time.Now()
	unlock()
	t.done = time.Now()
	return
}

// flockCLICycle runs `flock LOCK SELF -cs COUNTER`: flock(1) takes the lock
// and runs this program as a child, which does the critical section and
// prints the time it started. The wait is from asking flock(1) to the
// child's start, so it includes starting both processes: that is the cost
// of the CLI path.
func flockCLICycle(w *workerEnv) (t cycleTimes, err error) {
	t.start = time.Now()
	out, err := exec.Command("flock", w.lock, w.self, "-cs", w.cpath).Output()
	if err != nil {
		return
	}
	t.done = time.Now()
	ns, err := strconv.ParseInt(string(out[:len(out)-min(len(out), 1)]), 10, 64)
	if err != nil {
		err = fmt.Errorf("flock(1) child printed %q", out)
		return
	}
	t.got = time.Unix(0, ns)
	// The child's exit and flock(1)'s unlock are not observable from
	// here: the release is counted from the child's start.
	t.releasing = t.got
	return
}

// criticalSectionChild is the child flock(1) runs: the critical section
// on the counter file, then its start time on stdout.
func criticalSectionChild(counterPath string) int {
	started := time.Now()
	f, err := os.OpenFile(counterPath, os.O_RDWR, 0)
	if err == nil {
		err = criticalSection(f)
		f.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "critical section:", err)
		return 1
	}
	fmt.Println(started.UnixNano())
	return 0
}

// counterWidth is the counter's fixed width: 20 digits and a newline, read
// and rewritten in place so that the lock, not the file, is what is timed.
const counterWidth = 21

// criticalSection reads the counter and writes it back incremented. Two
// processes inside at once lose an update, which the suite counts.
func criticalSection(f *os.File) error {
	var buf [counterWidth]byte
	if _, err := f.ReadAt(buf[:], 0); err != nil {
		return err
	}
	n, err := strconv.ParseUint(string(buf[:counterWidth-1]), 10, 64)
	if err != nil {
		return fmt.Errorf("counter %q: %w", buf, err)
	}
	_, err = f.WriteAt(fmt.Appendf(nil, "%020d\n", n+1), 0)
	return err
}

// readCounter returns the counter's value.
func readCounter(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if len(b) < counterWidth-1 {
		return 0, fmt.Errorf("counter file %q too short", b)
	}
	return strconv.ParseUint(string(b[:counterWidth-1]), 10, 64)
}
