//go:build unix

package dirlock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/randname"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/lock"
)

// Multi-process tests re-execute this test binary as workers: TestMain
// runs the role named by envRole instead of the tests.
const (
	envRole   = "HOLD_DIRLOCK_ROLE"
	envTarget = "HOLD_DIRLOCK_TARGET"
	envIters  = "HOLD_DIRLOCK_ITERS"
	envFaults = "HOLD_DIRLOCK_FAULTS" // "point:n,point:n": die at the n-th pass of point
	envProto  = "HOLD_DIRLOCK_PROTO"  // "dir" (default) or "flock", for benchmarks
	envSoft   = "HOLD_DIRLOCK_SOFT"   // "1": a worker's requests ask for the file form (softfile.go)
)

func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(runWorker(role))
	}
	os.Exit(testenv.Run(m))
}

// fastEnv is the timing the multi-process tests give their workers:
// small enough that ownerless leftovers age out in a fraction of a second,
// with the heartbeat well inside the stale window.
var fastEnv = []string{
	EnvStale + "=300ms",
	EnvGrace + "=150ms",
	EnvHeartbeat + "=50ms",
	EnvMaxPoll + "=20ms",
}

// fastConfig is fastEnv for in-process protocols.
func fastConfig() Config {
	return Config{Stale: 300 * time.Millisecond, Grace: 150 * time.Millisecond, Heartbeat: 50 * time.Millisecond, MaxPoll: 20 * time.Millisecond}
}

// request builds what the public package would hand the protocol.
func request(path string) *lock.Request {
	r := &lock.Request{Path: path, Owner: proc.Self(), SoftFile: os.Getenv(envSoft) == "1"}
	r.Owner.ID = randname.Hex(16)
	return r
}

// worker is a running re-executed test binary.
type worker struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	done   chan struct{}
	err    error // exit error, valid after done
	stderr *strings.Builder
}

// startWorker runs role with env added to the environment.
func startWorker(t testing.TB, role string, env ...string) *worker {
	t.Helper()
	return startCmd(t, testenv.Command(append([]string{envRole + "=" + role}, env...)...))
}

// startCmd starts cmd with its stdout read line by line, and reaps it as
// soon as it exits: a killed worker must not linger as a zombie, which
// kill(pid, 0) would still report alive.
func startCmd(t testing.TB, cmd *exec.Cmd) *worker {
	t.Helper()
	w := &worker{cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{}), stderr: &strings.Builder{}}
	var err error
	w.stdin, err = cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	cmd.Stderr = writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return w.stderr.Write(b)
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		close(w.lines)
		w.err = cmd.Wait()
		close(w.done)
	}()
	t.Cleanup(func() {
		w.cmd.Process.Kill()
		<-w.done
	})
	return w
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// expect waits for the worker to print want (skipping other lines).
func (w *worker) expect(t testing.TB, want string) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				<-w.done
				t.Fatalf("worker exited (%v) before printing %q; stderr:\n%s", w.err, want, w.stderr)
			}
			if line == want {
				return
			}
		case <-timeout:
			t.Fatalf("worker did not print %q within 60s; stderr:\n%s", want, w.stderr)
		}
	}
}

// wait waits for the worker to exit and returns its exit error.
func (w *worker) wait(t testing.TB) error {
	t.Helper()
	select {
	case <-w.done:
	case <-time.After(120 * time.Second):
		t.Fatalf("worker hung; stderr:\n%s", w.stderr)
	}
	return w.err
}

func killedBySignal(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled()
}

// runWorker runs a worker role and returns the exit code.
func runWorker(role string) int {
	target := os.Getenv(envTarget)
	switch role {
	case "count":
		return workerCount(target)
	case "hold":
		return workerHold(target)
	case "try":
		return workerTry(target)
	case "bench":
		return workerBench(target)
	case "mix":
		return workerMix(target)
	case "slots":
		return workerSlots(target)
	case "slothold":
		return workerSlotHold(target)
	case "slotfault":
		return workerSlotFault(target)
	case "softhold":
		return workerSoftHold(target)
	}
	fmt.Fprintln(os.Stderr, "unknown role", role)
	return 2
}

// faults is a worker's plan of where to die: point -> n-th pass.
type faults struct {
	mu    sync.Mutex
	plan  map[string]int
	seen  map[string]int
	death string // file to record the point in before dying
}

func parseFaults(s, death string) *faults {
	f := &faults{plan: map[string]int{}, seen: map[string]int{}, death: death}
	for _, item := range strings.Split(s, ",") {
		point, n, ok := strings.Cut(item, ":")
		if !ok {
			continue
		}
		k, err := strconv.Atoi(n)
		if err == nil {
			f.plan[point] = k
		}
	}
	return f
}

// hit kills the process with SIGKILL at its planned pass of point, after
// recording the point, so the test knows the step was really reached.
func (f *faults) hit(point string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	want, ok := f.plan[point]
	if !ok {
		return
	}
	f.seen[point]++
	if f.seen[point] != want {
		return
	}
	if d, err := os.OpenFile(f.death, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644); err == nil {
		fmt.Fprintf(d, "%s %d\n", point, os.Getpid())
		d.Close()
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// workerCount increments the shared counter ITERS times under the lock,
// dying where FAULTS says. Exit 3 reports two holders seen at once.
func workerCount(target string) int {
	iters, _ := strconv.Atoi(os.Getenv(envIters))
	f := parseFaults(os.Getenv(envFaults), target+".deaths")
	p := New(Config{})
	p.fault = f.hit
	for i := 0; i < iters; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		h, err := p.Acquire(ctx, request(target+".lock"))
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "acquire:", err)
			return 2
		}
		if os.Getenv(envSoft) == "1" {
			// The file form was asked for: the lock held is a plain file.
			if fi, err := os.Lstat(target + ".lock"); err != nil || !fi.Mode().IsRegular() {
				fmt.Fprintln(os.Stderr, "the file form holds no plain file:", fi, err)
				return 5
			}
		}
		if code := criticalSection(target, f); code != 0 {
			return code
		}
		if err := h.Release(); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			return 4
		}
	}
	return 0
}

// criticalSection is the work the lock protects: prove exclusivity with an
// O_EXCL marker, increment the counter, and log the value this worker
// wrote in its own file. A marker left by a holder that was killed inside
// the section is recognised by its dead pid.
func criticalSection(target string, f *faults) int {
	marker := target + ".marker"
	if code := takeMarker(marker, target, func(pid int) string {
		return fmt.Sprintf("%d and %d\n", os.Getpid(), pid)
	}); code != 0 {
		return code
	}
	if f != nil {
		f.hit("cs")
	}
	n := readCounter(target)
	if err := os.WriteFile(target, []byte(strconv.Itoa(n+1)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "counter:", err)
		return 2
	}
	logf, err := os.OpenFile(fmt.Sprintf("%s.log.%d", target, os.Getpid()), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err == nil {
		fmt.Fprintln(logf, n+1)
		logf.Close()
	}
	os.Remove(marker)
	return 0
}

func readCounter(target string) int {
	b, err := os.ReadFile(target)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// checkCount verifies the shared counter against the workers' own logs:
// no value written twice (a lost update or two holders), and none missing
// (every increment a worker logged is in the count). Workers killed inside
// the section die before they write, so the counter equals the number of
// logged increments exactly.
func checkCount(t *testing.T, target string) int {
	t.Helper()
	if b, err := os.ReadFile(target + ".violation"); err == nil {
		t.Fatalf("two holders inside the critical section at once: %s", b)
	}
	logs, _ := filepath.Glob(target + ".log.*")
	seen := map[int]string{}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Fields(string(b)) {
			v, _ := strconv.Atoi(f)
			if prev, dup := seen[v]; dup {
				t.Fatalf("value %d written by two workers (%s and %s): a lost update", v, prev, l)
			}
			seen[v] = l
		}
	}
	n := readCounter(target)
	if n != len(seen) {
		t.Fatalf("counter is %d but workers logged %d increments", n, len(seen))
	}
	for v := 1; v <= n; v++ {
		if _, ok := seen[v]; !ok {
			t.Fatalf("increment %d of %d is in no worker's log", v, n)
		}
	}
	return n
}

// workerHold takes the lock, prints "held", holds it until stdin closes,
// then releases and prints "released" (or the release error).
func workerHold(target string) int {
	p := New(Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := p.Acquire(ctx, request(target+".lock"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "acquire:", err)
		return 2
	}
	fmt.Println("held")
	io.Copy(io.Discard, os.Stdin)
	if err := h.Release(); err != nil {
		fmt.Println("release:", err)
		return 4
	}
	fmt.Println("released")
	return 0
}

// workerTry waits for a line on stdin (the start signal), tries once, and
// prints "won" or "busy"; a winner holds the lock until stdin closes.
func workerTry(target string) int {
	p := New(Config{})
	in := bufio.NewReader(os.Stdin)
	fmt.Println("ready")
	if _, err := in.ReadString('\n'); err != nil {
		return 2
	}
	h, err := p.TryAcquire(request(target + ".lock"))
	if err != nil {
		if errors.Is(err, lock.ErrBusy) {
			fmt.Println("busy")
			return 0
		}
		fmt.Fprintln(os.Stderr, "try:", err)
		return 2
	}
	fmt.Println("won")
	io.Copy(io.Discard, in)
	h.Release()
	return 0
}

// takeMarker enters the section's O_EXCL marker: it proves that nobody
// else is inside, recognising the marker of a holder killed inside by its
// dead pid. A live owner is a second holder: it writes violation(pid) to
// target.violation and returns 3; another failure returns 2.
func takeMarker(marker, target string, violation func(pid int) string) int {
	for {
		m, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			fmt.Fprint(m, os.Getpid())
			m.Close()
			return 0
		}
		if !errors.Is(err, os.ErrExist) {
			fmt.Fprintln(os.Stderr, "marker:", err)
			return 2
		}
		b, _ := os.ReadFile(marker)
		pid, _ := strconv.Atoi(string(b))
		if pid > 0 && proc.Alive(pid, 0) != lock.Dead {
			fmt.Fprintf(os.Stderr, "two holders: pid %d is inside the section too\n", pid)
			os.WriteFile(target+".violation", []byte(violation(pid)), 0o644)
			return 3
		}
		os.Remove(marker) // a dead holder's leftover
	}
}
