// Package cycletest runs deadlocks between processes on a protocol, for
// the tests of the network protocols (etcd, PostgreSQL): worker
// processes (the test binary, run again) that take locks in given
// orders, and the checks that a cycle ends with exactly one ErrDeadlock
// naming it while locks taken in one global order never report one.
package cycletest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/lock"
)

// The worker's environment.
const (
	roleEnv   = "HOLD_CYCLETEST_ROLE"
	locksEnv  = "HOLD_CYCLETEST_LOCKS"  // comma separated, in order
	readyEnv  = "HOLD_CYCLETEST_READY"  // directory of the barrier
	countEnv  = "HOLD_CYCLETEST_N"      // workers at the barrier
	indexEnv  = "HOLD_CYCLETEST_INDEX"  // this worker's name there
	afterEnv  = "HOLD_CYCLETEST_AFTER"  // DeadlockAfter
	roundsEnv = "HOLD_CYCLETEST_ROUNDS" // ordered: rounds of random locks
	stepsEnv  = "HOLD_CYCLETEST_STEPS"  // steps: see Steps
)

// lister is what the network protocols' List is.
type lister interface {
	List(ctx context.Context, prefix string, each func(st *lock.Status, waiters int)) error
}

// queued returns how many requests wait in the server's queue for the
// lock name: a step of Steps waits for it ("queued:N") to order its
// request after others'.
func queued(p hold.Protocol, name string) (int, error) {
	l, ok := p.(lister)
	if !ok {
		return 0, fmt.Errorf("%s cannot list its waiters", p.Name())
	}
	n := 0
	err := l.List(context.Background(), name, func(st *lock.Status, waiters int) {
		if st.Path == name {
			n = waiters
		}
	})
	return n, err
}

// ExitDeadlock is a worker's exit status when an acquisition failed with
// ErrDeadlock (the error on its stderr), as hold run's.
const ExitDeadlock = 70

// hangBound only catches a hang: a cycle that nothing ends, on today's
// tree, or a worker stuck for another reason.
const hangBound = 60 * time.Second

// RunWorker runs this process as a worker if a test started it as one,
// with the protocol dial makes, and reports its exit status.
func RunWorker(dial func() (hold.Protocol, func(), error)) (code int, ok bool) {
	role := os.Getenv(roleEnv)
	if role == "" {
		return 0, false
	}
	p, closeP, err := dial()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		return 1, true
	}
	defer closeP()
	after, _ := time.ParseDuration(os.Getenv(afterEnv))
	opts := []hold.Option{hold.WithProtocol(p), hold.DeadlockAfter(after)}
	locks := strings.Split(os.Getenv(locksEnv), ",")
	switch role {
	case "ordered":
		rounds, _ := strconv.Atoi(os.Getenv(roundsEnv))
		return ordered(locks, rounds, opts), true
	case "steps":
		return failure(steps(context.Background(), p, strings.Split(os.Getenv(stepsEnv), ";"), opts)), true
	}
	return cycle(locks, opts), true
}

// cycle takes locks in order, each inside the Do of the one before (so
// that the wait for each keeps those before it), waiting at the barrier
// once it holds the first. Exit 0: it got them all; ExitDeadlock; 1:
// anything else.
func cycle(locks []string, opts []hold.Option) int {
	return failure(nest(context.Background(), locks, opts, barrier))
}

// nest takes locks in order, each inside the Do of the one before, and
// calls then each time it has taken one.
func nest(ctx context.Context, locks []string, opts []hold.Option, then func()) error {
	if len(locks) == 0 {
		return nil
	}
	return hold.Do(ctx, "", func(ctx context.Context) error {
		then()
		return nest(ctx, locks[1:], opts, then)
	}, append(opts, hold.LockFile(locks[0]))...)
}

// steps takes the locks of the steps in order, each inside the Do of the
// one before, each step "LOCK|ATTR|ATTR...": LOCK is a lock path, with
// "s:" before it for a shared hold; each ATTR is "after:NAME" (wait
// first until the marker NAME is made), "queued:N" or "queued:N@OTHER"
// (wait first until N requests wait in the server's queue for LOCK, or
// the lock OTHER), "w:SECONDS" (give up waiting after
// that long, and so do the waits of the steps after it, which run
// inside its Do), "release:SECONDS" (hold LOCK aside and let go of it
// after that long: the steps after it do not keep it) or "mark:NAME"
// (make the marker NAME once LOCK is held).
func steps(ctx context.Context, p hold.Protocol, list []string, opts []hold.Option) error {
	if len(list) == 0 {
		return nil
	}
	attrs := strings.Split(list[0], "|")
	name, shared := strings.CutPrefix(attrs[0], "s:")
	o := append(slices.Clone(opts), hold.LockFile(name))
	if shared {
		o = append(o, hold.Shared())
	}
	var marks []string
	var bound, release time.Duration
	for _, a := range attrs[1:] {
		k, v, _ := strings.Cut(a, ":")
		switch k {
		case "after":
			waitMarker(v)
		case "queued":
			v, on, _ := strings.Cut(v, "@")
			if on == "" {
				on = name
			}
			n, _ := strconv.Atoi(v)
			for {
				if q, err := queued(p, on); err != nil {
					return err
				} else if q >= n {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		case "w":
			secs, _ := strconv.ParseFloat(v, 64)
			bound = time.Duration(secs * float64(time.Second))
		case "mark":
			marks = append(marks, v)
		case "release":
			secs, _ := strconv.ParseFloat(v, 64)
			release = time.Duration(secs * float64(time.Second))
		}
	}
	if release > 0 {
		// Held aside, let go after a while: the next steps do not keep it.
		l, err := hold.Acquire(ctx, "", o...)
		if err != nil {
			return err
		}
		for _, m := range marks {
			os.WriteFile(filepath.Join(os.Getenv(readyEnv), m), nil, 0o644)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			time.Sleep(release)
			l.Release()
		}()
		defer func() { <-done }()
		return steps(ctx, p, list[1:], opts)
	}
	wctx := ctx
	if bound > 0 {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(ctx, bound)
		defer cancel()
	}
	// The next wait keeps this lock: it runs in this Do's fn.
	return hold.Do(wctx, "", func(ctx context.Context) error {
		for _, m := range marks {
			os.WriteFile(filepath.Join(os.Getenv(readyEnv), m), nil, 0o644)
		}
		return steps(ctx, p, list[1:], opts)
	}, o...)
}

// waitMarker waits until the marker name exists.
func waitMarker(name string) {
	for {
		if _, err := os.Stat(filepath.Join(os.Getenv(readyEnv), name)); err == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// barrier says this worker holds its first lock and waits until every
// worker does.
func barrier() {
	ready := os.Getenv(readyEnv)
	if ready == "" {
		return
	}
	n, _ := strconv.Atoi(os.Getenv(countEnv))
	os.WriteFile(filepath.Join(ready, os.Getenv(indexEnv)), nil, 0o644)
	for {
		ents, _ := os.ReadDir(ready)
		if len(ents) >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ordered takes, rounds times, a random subset of locks in their order
// (the global one), holding each a random moment, so that waits last
// longer than DeadlockAfter and their searches run but no cycle can form.
func ordered(locks []string, rounds int, opts []hold.Option) int {
	for range rounds {
		var some []string
		for _, key := range locks {
			if rand.IntN(3) != 0 {
				some = append(some, key)
			}
		}
		err := nest(context.Background(), some, opts, func() {
			time.Sleep(time.Duration(rand.IntN(15)) * time.Millisecond)
		})
		if err != nil {
			return failure(err)
		}
	}
	return 0
}

// failure prints err, if any, and returns the worker's exit status for
// it.
func failure(err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, err)
	if errors.Is(err, hold.ErrDeadlock) {
		return ExitDeadlock
	}
	return 1
}

// Result is what one worker did.
type Result struct {
	PID  int
	Code int
	Out  string
}

// Cycle starts one worker per order (each a list of lock paths, taken in
// turn; every worker holds its first before any waits for its second)
// with DeadlockAfter after, and returns what each did and how long all
// took. env is passed to the workers (where the server is).
func Cycle(t *testing.T, orders [][]string, after time.Duration, env ...string) ([]Result, time.Duration) {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	if err := os.Mkdir(ready, 0o755); err != nil {
		t.Fatal(err)
	}
	envs := make([][]string, len(orders))
	for i, order := range orders {
		envs[i] = append([]string{roleEnv + "=cycle", locksEnv + "=" + strings.Join(order, ","), readyEnv + "=" + ready,
			countEnv + "=" + strconv.Itoa(len(orders)), indexEnv + "=" + strconv.Itoa(i), afterEnv + "=" + after.String()}, env...)
	}
	return run(t, envs)
}

// Steps starts one worker per list of steps (see steps: locks taken in
// turn, each kept while the next is waited for, ordered by markers and
// queues) with DeadlockAfter after, and returns what each did and how
// long all took.
func Steps(t *testing.T, workers [][]string, after time.Duration, env ...string) ([]Result, time.Duration) {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready")
	if err := os.Mkdir(ready, 0o755); err != nil {
		t.Fatal(err)
	}
	envs := make([][]string, len(workers))
	for i, w := range workers {
		envs[i] = append([]string{roleEnv + "=steps", stepsEnv + "=" + strings.Join(w, ";"), readyEnv + "=" + ready,
			afterEnv + "=" + after.String()}, env...)
	}
	return run(t, envs)
}

// Ordered starts workers that each take, rounds times, random subsets of
// locks in the order given, with DeadlockAfter after.
func Ordered(t *testing.T, locks []string, workers, rounds int, after time.Duration, env ...string) ([]Result, time.Duration) {
	t.Helper()
	envs := make([][]string, workers)
	for i := range envs {
		envs[i] = append([]string{roleEnv + "=ordered", locksEnv + "=" + strings.Join(locks, ","),
			roundsEnv + "=" + strconv.Itoa(rounds), afterEnv + "=" + after.String()}, env...)
	}
	return run(t, envs)
}

// run starts one worker per environment and waits for them all.
func run(t *testing.T, envs [][]string) ([]Result, time.Duration) {
	t.Helper()
	start := time.Now()
	cmds := make([]*exec.Cmd, len(envs))
	outs := make([]*bytes.Buffer, len(envs))
	for i, env := range envs {
		cmds[i] = testenv.Command(env...)
		outs[i] = &bytes.Buffer{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	kill := time.AfterFunc(hangBound, func() {
		for _, c := range cmds {
			c.Process.Kill()
		}
	})
	defer kill.Stop()
	res := make([]Result, len(envs))
	for i, c := range cmds {
		c.Wait()
		res[i] = Result{PID: c.Process.Pid, Code: c.ProcessState.ExitCode(), Out: outs[i].String()}
	}
	if time.Since(start) >= hangBound {
		t.Fatalf("the workers hung for %v and were killed: %+v", hangBound, res)
	}
	return res, time.Since(start)
}

// CheckOneDeadlock checks that exactly one worker failed with
// ErrDeadlock, with an error naming every worker and every lock of
// locks, and that the others got all their locks.
func CheckOneDeadlock(t *testing.T, res []Result, locks []string) {
	t.Helper()
	failed := -1
	for i, r := range res {
		switch r.Code {
		case 0:
		case ExitDeadlock:
			if failed >= 0 {
				t.Errorf("workers %d and %d both gave up:\n%s\n%s", res[failed].PID, r.PID, res[failed].Out, r.Out)
			}
			failed = i
		default:
			t.Errorf("worker %d exited %d:\n%s", r.PID, r.Code, r.Out)
		}
	}
	if failed < 0 {
		t.Fatalf("no worker reported the deadlock: %+v", res)
	}
	msg := res[failed].Out
	t.Log(msg)
	if !strings.Contains(msg, "deadlock") {
		t.Errorf("the error does not say deadlock: %s", msg)
	}
	for _, r := range res {
		if !strings.Contains(msg, "pid "+strconv.Itoa(r.PID)+" ") {
			t.Errorf("the error does not name pid %d: %s", r.PID, msg)
		}
	}
	for _, l := range locks {
		if !strings.Contains(msg, l) {
			t.Errorf("the error does not name %s: %s", l, msg)
		}
	}
}

// CheckNoDeadlock checks that every worker got all its locks.
func CheckNoDeadlock(t *testing.T, res []Result) {
	t.Helper()
	for _, r := range res {
		if r.Code != 0 {
			t.Errorf("worker %d exited %d:\n%s", r.PID, r.Code, r.Out)
		}
	}
}

// WaitPlanted holds held through p and, inside its Do, calls plant (which
// makes someone else hold wanted and wait for held, and say so) and then
// waits for wanted with a short DeadlockAfter, for at most a few seconds.
// With report the wait must fail with ErrDeadlock (the planted wait is
// trusted: a control that shows the search would see it); without, it
// must last until it is given up (the planted wait is another user's,
// and never trusted).
func WaitPlanted(t *testing.T, p hold.Protocol, held, wanted string, plant func(), report bool) {
	t.Helper()
	ctx := context.Background()
	// The wait for wanted keeps held: it runs inside held's Do.
	err := hold.Do(ctx, "", func(ctx context.Context) error {
		plant()
		// Ended by a cancel, not a deadline: a wait with a deadline
		// ends by itself, and is never part of a reported cycle.
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := time.AfterFunc(5*time.Second, cancel)
		defer stop.Stop()
		l, err := hold.Acquire(wctx, "", hold.WithProtocol(p), hold.LockFile(wanted), hold.DeadlockAfter(100*time.Millisecond))
		if err == nil {
			l.Release()
			return errors.New("the lock held by the planted wait was granted")
		}
		t.Log(err)
		switch {
		case !report && errors.Is(err, hold.ErrDeadlock):
			return fmt.Errorf("another user's planted wait produced a report: %w", err)
		case !report && !errors.Is(err, context.Canceled):
			return fmt.Errorf("the wait ended with %w, want it given up", err)
		case report && !errors.Is(err, hold.ErrDeadlock):
			return fmt.Errorf("the same user's wait (the control) was not reported: %w", err)
		}
		return nil
	}, hold.WithProtocol(p), hold.LockFile(held))
	if err != nil {
		t.Fatal(err)
	}
}

// after is the workers' DeadlockAfter in Cycles: short, so that the test
// spends its time on the search, not on the delay.
const after = 200 * time.Millisecond

// Cycles runs two and three workers, worker i holding lock i (named
// base-l<i>) and waiting for lock i+1: exactly one must give up with
// ErrDeadlock naming every worker and lock, and the others get both
// locks. base makes each subtest's names.
func Cycles(t *testing.T, base func(t *testing.T) string, env ...string) {
	for _, n := range []int{2, 3} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			b := base(t)
			locks := make([]string, n)
			for i := range locks {
				locks[i] = fmt.Sprintf("%s-l%d", b, i)
			}
			orders := make([][]string, n)
			for i := range orders {
				orders[i] = []string{locks[i], locks[(i+1)%n]}
			}
			res, took := Cycle(t, orders, after, env...)
			t.Logf("%d-process cycle ended in %v", n, took)
			CheckOneDeadlock(t, res, locks)
		})
	}
}

// GlobalOrder runs three workers that each take, 100 times, random locks
// of three (named base-a, -b, -c) in that order, with waits longer than
// their DeadlockAfter: none may report a deadlock.
func GlobalOrder(t *testing.T, base string, env ...string) {
	locks := []string{base + "-a", base + "-b", base + "-c"}
	res, took := Ordered(t, locks, 3, 100, 5*time.Millisecond, env...)
	t.Logf("300 runs in a global order took %v", took)
	CheckNoDeadlock(t, res)
}

// ReaderBehindWriter runs the cycle through a reader queued behind a
// waiting writer: worker 1 holds base-a shared and waits for base-b;
// worker 2 holds base-b and waits to share base-a, queued behind worker
// 3's exclusive request for base-a, which waits for worker 1. Exactly one
// must give up with ErrDeadlock naming every worker and both locks, and
// the others get their locks.
func ReaderBehindWriter(t *testing.T, base string, env ...string) {
	a, b := base+"-a", base+"-b"
	res, took := Steps(t, [][]string{
		{"s:" + a + "|mark:p1", b + "|queued:2@" + a},
		{b + "|mark:p2", "s:" + a + "|after:p1|queued:1"},
		{a + "|after:p1|after:p2"},
	}, after, env...)
	t.Logf("the cycle through a queued reader ended in %v", took)
	CheckOneDeadlock(t, res, []string{a, b})
}

// BoundedLink runs a two-process cycle whose one wait gives up by itself
// after three seconds: no deadlock may be reported; that wait times out
// and the other then gets its lock.
func BoundedLink(t *testing.T, base string, env ...string) {
	a, b := base+"-a", base+"-b"
	res, _ := Steps(t, [][]string{
		{a + "|mark:p1", b + "|after:p2|w:3"},
		{b + "|mark:p2", a + "|after:p1"},
	}, after, env...)
	for _, r := range res {
		if r.Code == ExitDeadlock {
			t.Errorf("worker %d reported a deadlock through a wait that ends by itself:\n%s", r.PID, r.Out)
		}
	}
	if res[0].Code != 1 || !strings.Contains(res[0].Out, "timed out") && !strings.Contains(res[0].Out, "deadline") {
		t.Errorf("the bounded wait: exit %d, %s; want its timeout", res[0].Code, res[0].Out)
	}
	if res[1].Code != 0 {
		t.Errorf("the other wait: exit %d, %s; want its lock once the bounded one gave up", res[1].Code, res[1].Out)
	}
}

// Random runs near rings and true rings of 2 to 4 workers, each holding
// its lock while it waits for the next one's, one ring at a time. A
// near ring has one link that ends: a wait with a deadline, or a holder
// that holds its lock aside and lets go of it while it waits: nobody may
// report a deadlock, and every worker gets its locks or (the bounded
// wait) times out. A true ring ends with exactly one ErrDeadlock. It
// logs the slowest true ring.
func Random(t *testing.T, base string, near, true_ int, env ...string) {
	type ring struct {
		n    int
		kind string // "" for a true ring
		at   int
	}
	var rings []ring
	for range near {
		n := 2 + rand.IntN(3)
		rings = append(rings, ring{n: n, kind: []string{"deadline", "letgo"}[rand.IntN(2)], at: rand.IntN(n)})
	}
	for range true_ {
		rings = append(rings, ring{n: 2 + rand.IntN(3)})
	}
	rand.Shuffle(len(rings), func(i, j int) { rings[i], rings[j] = rings[j], rings[i] })
	var slowest time.Duration
	for k, rg := range rings {
		var all []string
		for i := range rg.n {
			all = append(all, "after:m"+strconv.Itoa(i))
		}
		workers := make([][]string, rg.n)
		for i := range rg.n {
			l := fmt.Sprintf("%s-r%d-l%d", base, k, i)
			next := fmt.Sprintf("%s-r%d-l%d", base, k, (i+1)%rg.n)
			first, second := l+"|mark:m"+strconv.Itoa(i), next+"|"+strings.Join(all, "|")
			switch {
			case i == rg.at && rg.kind == "deadline":
				second += "|w:1.5"
			case i == rg.at && rg.kind == "letgo":
				first += "|release:1.5"
			}
			workers[i] = []string{first, second}
		}
		res, took := Steps(t, workers, after, env...)
		deadlocks := 0
		for i, r := range res {
			switch {
			case r.Code == ExitDeadlock:
				deadlocks++
			case r.Code != 0 && !(rg.kind == "deadline" && i == rg.at && r.Code == 1):
				t.Errorf("ring %d (%+v): worker %d exited %d: %s", k, rg, r.PID, r.Code, r.Out)
			}
		}
		switch {
		case rg.kind != "" && deadlocks > 0:
			t.Errorf("ring %d, a near ring (%+v): %d deadlocks reported: %+v", k, rg, deadlocks, res)
		case rg.kind == "" && deadlocks != 1:
			t.Errorf("ring %d, a true ring of %d: %d deadlocks reported, want 1: %+v", k, rg.n, deadlocks, res)
		case rg.kind == "":
			slowest = max(slowest, took)
		}
	}
	t.Logf("%d near rings, none reported; %d true rings, one deadlock each, the slowest done in %v", near, true_, slowest)
}

// RandomCounts are the numbers of near and true rings Random runs: few by
// default, 200 and 50 with HOLD_TEST_LONG=1.
func RandomCounts(near, true_ int) (int, int) {
	if os.Getenv("HOLD_TEST_LONG") == "1" {
		return 200, 50
	}
	return near, true_
}
