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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/testenv"
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
)

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
	if role == "ordered" {
		rounds, _ := strconv.Atoi(os.Getenv(roundsEnv))
		return ordered(locks, rounds, opts), true
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
// must time out (the planted wait is another user's, and never trusted).
func WaitPlanted(t *testing.T, p hold.Protocol, held, wanted string, plant func(), report bool) {
	t.Helper()
	ctx := context.Background()
	// The wait for wanted keeps held: it runs inside held's Do.
	err := hold.Do(ctx, "", func(ctx context.Context) error {
		plant()
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		l, err := hold.Acquire(wctx, "", hold.WithProtocol(p), hold.LockFile(wanted), hold.DeadlockAfter(100*time.Millisecond))
		if err == nil {
			l.Release()
			return errors.New("the lock held by the planted wait was granted")
		}
		t.Log(err)
		switch {
		case !report && errors.Is(err, hold.ErrDeadlock):
			return fmt.Errorf("another user's planted wait produced a report: %w", err)
		case !report && !errors.Is(err, hold.ErrTimeout):
			return fmt.Errorf("the wait ended with %w, want a timeout", err)
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
