package hold_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/fairq"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/internal/waits"
	"github.com/hold-dev/hold/portable"
)

// Deadlocks between processes (internal/deadlock/cycle.go): N workers, worker i
// takes lock i, says so, waits until every worker holds its first lock,
// and then waits for lock i+1 (mod N). Nothing but the search can end
// that; exactly one worker must fail with ErrDeadlock naming the cycle,
// and the others must get their second lock once it lets go.

func init() { hold.RegisterWorker("cycle", cycleWorker) }

// cycleWorker takes the locks of CYCLE_LOCKS (comma separated) in order,
// with the protocol CYCLE_PROTO (flock, fair, dir), after writing
// CYCLE_READY/<own index> once it holds the first and seeing CYCLE_N
// such files. CYCLE_SHAPE (or CYCLE_SHAPE_<own index>) says how it keeps the first while it waits
// for the next:
//
//   - "do" (the default): each lock in a Do nested in the previous
//     one's fn, with fn's context;
//   - "heldby": each by Acquire, with FailIfHeldBy naming the locks
//     taken before it;
//   - "aside": the first in a Do of another goroutine, which holds it
//     for CYCLE_ASIDE and then lets go, while the main goroutine waits
//     for the others with a context of its own: the wait keeps nothing,
//     and the process goes on whatever the others do.
//
// Exit 0: it got them all; 70: ErrDeadlock (the error on stderr); 1:
// anything else.
func cycleWorker() int {
	locks := strings.Split(os.Getenv("CYCLE_LOCKS"), ",")
	opts := cycleOptions(os.Getenv("CYCLE_PROTO"))
	pause := func() {
		if d, _ := time.ParseDuration(os.Getenv("CYCLE_HOLD")); d > 0 {
			time.Sleep(d)
		}
	}
	var err error
	shape := os.Getenv("CYCLE_SHAPE_" + os.Getenv("CYCLE_INDEX"))
	if shape == "" {
		shape = os.Getenv("CYCLE_SHAPE")
	}
	switch shape {
	case "heldby":
		err = cycleHeldBy(locks, opts, pause)
	case "aside":
		err = cycleAside(locks, opts)
	default:
		var take func(ctx context.Context, i int) error
		take = func(ctx context.Context, i int) error {
			if i == len(locks) {
				return nil
			}
			return hold.Do(ctx, locks[i], func(ctx context.Context) error {
				if i == 0 {
					cycleReady()
				}
				pause()
				return take(ctx, i+1)
			}, opts...)
		}
		err = take(context.Background(), 0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, hold.ErrDeadlock) {
			return 70
		}
		return 1
	}
	return 0
}

// cycleReady says that the worker holds its first lock, and waits until
// every worker of the cycle does (CYCLE_READY, CYCLE_N).
func cycleReady() {
	ready := os.Getenv("CYCLE_READY")
	if ready == "" {
		return
	}
	n, _ := strconv.Atoi(os.Getenv("CYCLE_N"))
	os.WriteFile(filepath.Join(ready, os.Getenv("CYCLE_INDEX")), nil, 0o644)
	for {
		ents, _ := os.ReadDir(ready)
		if len(ents) >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// cycleHeldBy is cycleWorker's "heldby" shape.
func cycleHeldBy(locks []string, opts []hold.Option, pause func()) error {
	var held []*hold.Lock
	defer func() {
		for _, l := range held {
			l.Release()
		}
	}()
	for i, target := range locks {
		l, err := hold.Acquire(context.Background(), target, append(opts[:len(opts):len(opts)], hold.FailIfHeldBy(held...))...)
		if err != nil {
			return err
		}
		held = append(held, l)
		if i == 0 {
			cycleReady()
		}
		pause()
	}
	return nil
}

// cycleAside is cycleWorker's "aside" shape.
func cycleAside(locks []string, opts []hold.Option) error {
	aside, _ := time.ParseDuration(os.Getenv("CYCLE_ASIDE"))
	taken := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- hold.Do(context.Background(), locks[0], func(ctx context.Context) error {
			close(taken)
			time.Sleep(aside)
			return nil
		}, opts...)
	}()
	select {
	case <-taken:
	case err := <-done:
		return err
	}
	cycleReady()
	for _, target := range locks[1:] {
		l, err := hold.Acquire(context.Background(), target, opts...)
		if err != nil {
			return err
		}
		defer l.Release()
	}
	return <-done
}

func cycleOptions(proto string) []hold.Option {
	switch proto {
	case "fair":
		return []hold.Option{hold.Fair()}
	case "dir":
		return []hold.Option{hold.WithProtocol(portable.New())}
	}
	return nil
}

// cycleResult is what one worker of a cycle did.
type cycleResult struct {
	pid  int
	code int
	out  string
}

// runCycle starts one worker per lock list of orders and returns what
// each did, and how long the whole took.
func runCycle(t *testing.T, proto string, orders [][]string, ready bool, env ...string) ([]cycleResult, time.Duration) {
	t.Helper()
	dir := t.TempDir()
	readyDir := ""
	if ready {
		readyDir = filepath.Join(dir, "ready")
		if err := os.Mkdir(readyDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	ws := make([]*coreWorker, len(orders))
	for i, order := range orders {
		ws[i] = startCoreWorker(t, "cycle", append([]string{"CYCLE_LOCKS=" + strings.Join(order, ","), "CYCLE_PROTO=" + proto,
			"CYCLE_READY=" + readyDir, "CYCLE_N=" + strconv.Itoa(len(orders)), "CYCLE_INDEX=" + strconv.Itoa(i)}, env...)...)
	}
	res := make([]cycleResult, len(orders))
	for i, w := range ws {
		err := w.wait(t, 60*time.Second)
		res[i] = cycleResult{pid: w.cmd.Process.Pid, code: w.cmd.ProcessState.ExitCode(), out: w.out.String()}
		_ = err
	}
	return res, time.Since(start)
}

// checkOneDeadlock checks that exactly one worker failed with ErrDeadlock,
// naming every worker and lock of the cycle, and that the others got
// their locks.
func checkOneDeadlock(t *testing.T, res []cycleResult, locks []string) {
	t.Helper()
	failed := -1
	for i, r := range res {
		switch r.code {
		case 0:
		case 70:
			if failed >= 0 {
				t.Errorf("workers %d and %d both gave up:\n%s\n%s", res[failed].pid, r.pid, res[failed].out, r.out)
			}
			failed = i
		default:
			t.Errorf("worker %d exited %d:\n%s", r.pid, r.code, r.out)
		}
	}
	if failed < 0 {
		t.Fatalf("no worker reported the deadlock: %+v", res)
	}
	msg := res[failed].out
	if !strings.Contains(msg, "deadlock") {
		t.Errorf("the error does not say deadlock: %s", msg)
	}
	for _, r := range res {
		if !strings.Contains(msg, "pid "+strconv.Itoa(r.pid)+" ") {
			t.Errorf("the error does not name pid %d: %s", r.pid, msg)
		}
	}
	for _, l := range locks {
		if !strings.Contains(msg, filepath.Base(l)) {
			t.Errorf("the error does not name %s: %s", l, msg)
		}
	}
}

func TestDeadlockCycle(t *testing.T) {
	type shape struct {
		proto, shape string
		n            int
	}
	var shapes []shape
	for _, proto := range []string{"flock", "fair", "dir"} {
		for _, n := range []int{2, 3} {
			shapes = append(shapes, shape{proto, "do", n})
		}
	}
	shapes = append(shapes, shape{"flock", "heldby", 2}, shape{"dir", "heldby", 2})
	for _, sh := range shapes {
		proto, n := sh.proto, sh.n
		{
			t.Run(fmt.Sprintf("%s/%s/%d", proto, sh.shape, n), func(t *testing.T) {
				dir := t.TempDir()
				locks := make([]string, n)
				for i := range locks {
					locks[i] = filepath.Join(dir, fmt.Sprintf("l%d", i))
				}
				orders := make([][]string, n)
				for i := range orders {
					orders[i] = []string{locks[i], locks[(i+1)%n]}
				}
				res, took := runCycle(t, proto, orders, true, "CYCLE_SHAPE="+sh.shape)
				t.Logf("%d-process %s cycle ended in %v", n, proto, took)
				paths := make([]string, n)
				for i, l := range locks {
					paths[i] = l + ".lock"
				}
				checkOneDeadlock(t, res, paths)
				for _, r := range res {
					if r.code == 70 {
						t.Log(r.out)
					}
				}
			})
		}
	}
}

// TestDeadlockCycleBehindFairWaiters: a cycle whose wait through a fair
// queue is behind another fair waiter. A holds l0 and B holds l1; C, who
// holds nothing, queues first for l1; then A queues for l1 behind C, and
// B for l0. A's wait can end only once B lets go of l1, and B's once A
// lets go of l0: one of them must give up, and then everyone, C
// included, completes. A's place behind C is watched as the front of the
// queue is.
func TestDeadlockCycleBehindFairWaiters(t *testing.T) {
	dir := t.TempDir()
	l0, l1 := filepath.Join(dir, "l0"), filepath.Join(dir, "l1")
	ready := filepath.Join(dir, "ready")
	if err := os.Mkdir(ready, 0o755); err != nil {
		t.Fatal(err)
	}
	common := []string{"CYCLE_PROTO=fair", "CYCLE_READY=" + ready, "CYCLE_N=3"}
	ws := []*coreWorker{
		startCoreWorker(t, "cycle", append(common, "CYCLE_LOCKS="+l0+","+l1, "CYCLE_INDEX=0")...),
		startCoreWorker(t, "cycle", append(common, "CYCLE_LOCKS="+l1+","+l0, "CYCLE_INDEX=1")...),
	}
	testenv.Eventually(t, 30*time.Second, "A and B hold their first locks", func() bool {
		ents, _ := os.ReadDir(ready)
		return len(ents) >= 2
	})
	c := startCoreWorker(t, "cycle", "CYCLE_PROTO=fair", "CYCLE_LOCKS="+l1)
	testenv.Eventually(t, 30*time.Second, "C is queued for l1", func() bool {
		n, _ := fairq.Waiting(l1 + ".lock")
		return n >= 1
	})
	if err := os.WriteFile(filepath.Join(ready, "2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := make([]cycleResult, len(ws))
	for i, w := range ws {
		w.wait(t, 60*time.Second)
		res[i] = cycleResult{pid: w.cmd.Process.Pid, code: w.cmd.ProcessState.ExitCode(), out: w.out.String()}
	}
	checkOneDeadlock(t, res, []string{l0 + ".lock", l1 + ".lock"})
	if err := c.wait(t, 60*time.Second); err != nil {
		t.Errorf("C, queued first for l1: %v\n%s", err, c.out.String())
	}
}

// TestNoDeadlockThroughAnotherGoroutine: worker A holds L0 in one
// goroutine, which lets go after a few seconds, while another of its
// goroutines waits for L1; worker B holds L1 and waits for L0. A process
// keeps L0 and waits for L1, but its wait does not keep L0, and both
// complete once A's first goroutine is done: that is no deadlock, and
// nobody may report one (the search looks, twice, well before then).
func TestNoDeadlockThroughAnotherGoroutine(t *testing.T) {
	for _, proto := range []string{"flock", "fair", "dir"} {
		t.Run(proto, func(t *testing.T) {
			dir := t.TempDir()
			l0, l1 := filepath.Join(dir, "l0"), filepath.Join(dir, "l1")
			res, took := runCycle(t, proto, [][]string{{l0, l1}, {l1, l0}}, true,
				"CYCLE_SHAPE_0=aside", "CYCLE_ASIDE=4s")
			t.Logf("ended in %v", took)
			for _, r := range res {
				if r.code != 0 {
					t.Errorf("worker %d exited %d (want 0, no deadlock):\n%s", r.pid, r.code, r.out)
				}
			}
		})
	}
}

// TestDeadlockAfterZero: with the search off, a cycle is a wait like any
// other, which only its context ends.
func TestDeadlockAfterZero(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	la, err := hold.Acquire(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release()
	w := startCoreWorker(t, "cycle", "CYCLE_LOCKS="+b+","+a, "CYCLE_HOLD=0")
	testenv.Eventually(t, 30*time.Second, "the worker holds b", func() bool {
		st, err := hold.Inspect(b)
		return err == nil && st.State != hold.Free
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = hold.Acquire(ctx, b, hold.DeadlockAfter(0))
	if !errors.Is(err, hold.ErrTimeout) {
		t.Fatalf("Acquire with DeadlockAfter(0) in a cycle: %v, want a timeout", err)
	}
	la.Release()
	if err := w.wait(t, 30*time.Second); err != nil {
		t.Fatalf("worker: %v\n%s", err, w.out.String())
	}
}

// TestNoDeadlockInGlobalOrder: workers that take random sets of locks in
// one global order, holding each a random moment, never form a cycle,
// however long they wait: none may report one. Each round runs several
// workers that take their locks many times (CYCLE_ROUNDS), with the
// search after a short delay so that waits reach it often.
func TestNoDeadlockInGlobalOrder(t *testing.T) {
	dir := t.TempDir()
	locks := make([]string, 4)
	for i := range locks {
		locks[i] = filepath.Join(dir, fmt.Sprintf("g%d", i))
	}
	const workers, rounds = 5, 200 // 1,000 runs of a random order
	rng := rand.New(rand.NewPCG(1, 2))
	ws := make([]*coreWorker, workers)
	for i := range ws {
		var orders []string
		for range rounds {
			var set []string
			for _, l := range locks {
				if rng.IntN(2) == 0 {
					set = append(set, l)
				}
			}
			if len(set) == 0 {
				set = locks[:1]
			}
			orders = append(orders, strings.Join(set, ":"))
		}
		ws[i] = startCoreWorker(t, "ordered", "ORDERED_RUNS="+strings.Join(orders, ","), "ORDERED_SEED="+strconv.Itoa(i))
	}
	for _, w := range ws {
		if err := w.wait(t, 120*time.Second); err != nil {
			t.Errorf("worker %d: %v\n%s", w.cmd.Process.Pid, err, w.out.String())
		}
	}
}

func init() { hold.RegisterWorker("ordered", orderedWorker) }

// orderedWorker takes, for each run of ORDERED_RUNS (comma separated,
// each a colon-separated list of targets in the global order), its
// locks in order, holding each a random moment below 3 ms, with the
// deadlock search after 20 ms; any error fails it.
func orderedWorker() int {
	seed, _ := strconv.Atoi(os.Getenv("ORDERED_SEED"))
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	ctx := context.Background()
	for _, run := range strings.Split(os.Getenv("ORDERED_RUNS"), ",") {
		var held []*hold.Lock
		for _, target := range strings.Split(run, ":") {
			l, err := hold.Acquire(ctx, target, hold.DeadlockAfter(20*time.Millisecond))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			held = append(held, l)
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
		}
		for i := len(held) - 1; i >= 0; i-- {
			held[i].Release()
		}
	}
	return 0
}

// TestPlantedWaitEntry: an entry that says this process waits for the
// lock a worker holds would close a cycle with the worker's wait for the
// lock this process holds. Written by this user, it does (the control:
// the worker, the younger wait, gives up); given to another user, the
// same entry is not believed, and the worker waits on until this process
// lets go.
func TestPlantedWaitEntry(t *testing.T) {
	for _, planted := range []bool{false, true} {
		t.Run(map[bool]string{false: "own", true: "another user's"}[planted], func(t *testing.T) {
			if planted && os.Geteuid() != 0 {
				if os.Getenv(testenv.NoSkipEnv) != "" {
					t.Fatal("needs root to give an entry to another user (CI runs the tests as root)")
				}
				t.Skip("needs root to give an entry to another user (CI runs the tests as root)")
			}
			dir := t.TempDir()
			a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
			la, err := hold.Acquire(context.Background(), a)
			if err != nil {
				t.Fatal(err)
			}
			defer la.Release()
			w := startCoreWorker(t, "cycle", "CYCLE_LOCKS="+b+","+a)
			testenv.Eventually(t, 30*time.Second, "the worker holds b", func() bool {
				st, err := hold.Inspect(b)
				return err == nil && st.State != hold.Free
			})
			fi, err := os.Stat(b + ".lock")
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			fa, err := os.Stat(a + ".lock")
			if err != nil {
				t.Fatal(err)
			}
			sa := fa.Sys().(*syscall.Stat_t)
			e := waits.Self()
			e.Proto, e.Path, e.Since = "flock", b+".lock", time.Now().Add(-time.Hour).UnixNano()
			e.Lock = fmt.Sprintf("ino:%d:%d", st.Dev, st.Ino)
			e.Keeps = []string{fmt.Sprintf("flock ino:%d:%d", sa.Dev, sa.Ino)}
			name, err := waits.Publish(&e)
			if err != nil {
				t.Fatal(err)
			}
			defer waits.Remove(name)
			if planted {
				wd, _ := waits.Dir()
				testenv.Lchown(t, filepath.Join(wd, name), testenv.Someone, testenv.SomeGroup)
			}
			select {
			case <-w.done:
			case <-time.After(4 * time.Second): // well past the worker's search
			}
			if !planted {
				if err := w.wait(t, 30*time.Second); w.cmd.ProcessState.ExitCode() != 70 {
					t.Fatalf("with this user's entry the worker ended with %v, want exit 70:\n%s", err, w.out.String())
				}
				return
			}
			select {
			case <-w.done:
				t.Fatalf("the worker ended while this process still held a (%v):\n%s", w.err, w.out.String())
			default:
			}
			la.Release()
			if err := w.wait(t, 30*time.Second); err != nil {
				t.Fatalf("worker: %v\n%s", err, w.out.String())
			}
		})
	}
}
