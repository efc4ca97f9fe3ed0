//go:build linux

// Package slottest is what the semaphore tests of the server protocols
// (etcd, PostgreSQL) share: worker processes that take places in a
// semaphore through a protocol's lock.Semaphore methods, and the checks
// of what they logged. A test binary's TestMain gives the workers their
// turn first (RunWorker); a test starts them (Stress, StartHolder).
//
// Every worker appends one line per event to a shared log, each with one
// write to a file opened O_APPEND, so that lines of many processes never
// interleave and their order is the order of the events: "enter pid slot
// token" once it holds a place, "leave pid slot" just before it releases
// it. The test appends "kill pid" once it has killed and reaped a worker,
// whose place the protocol then frees in its own time. Replaying the log
// tells how many were inside at every moment, and who held each place.
package slottest

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/lock"
)

// The workers' parameters, in their environment.
const (
	roleEnv   = "HOLD_SLOTTEST_ROLE" // "stress" or "hold"
	targetEnv = "HOLD_SLOTTEST_TARGET"
	slotsEnv  = "HOLD_SLOTTEST_SLOTS"
	countEnv  = "HOLD_SLOTTEST_COUNT"
	logEnv    = "HOLD_SLOTTEST_LOG"
)

// hangBound bounds every wait of a test, only to catch hangs.
const hangBound = 2 * time.Minute

// Open makes the protocol a worker takes places through, and a function
// that closes it.
type Open func() (lock.Semaphore, func(), error)

// RunWorker runs this process as a worker, if a test started it as one,
// and returns its exit status; ok is false in the test process itself.
func RunWorker(open Open) (code int, ok bool) {
	role := os.Getenv(roleEnv)
	if role == "" {
		return 0, false
	}
	sem, closeFn, err := open()
	if err != nil {
		fmt.Fprintln(os.Stderr, "slottest worker:", err)
		return 1, true
	}
	defer closeFn()
	slots, _ := strconv.Atoi(os.Getenv(slotsEnv))
	req := func() *lock.Request {
		return &lock.Request{Path: os.Getenv(targetEnv), Slots: slots,
			Owner: lock.Owner{PID: os.Getpid(), Command: []string{"slottest", role}}}
	}
	switch role {
	case "stress":
		err = stress(sem, req, os.Getenv(logEnv))
	case "hold":
		err = holdOne(sem, req)
	default:
		err = fmt.Errorf("no worker role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "slottest worker:", err)
		return 1, true
	}
	return 0, true
}

// stress takes a place count times, logging each time inside.
func stress(sem lock.Semaphore, req func() *lock.Request, logPath string) error {
	count, _ := strconv.Atoi(os.Getenv(countEnv))
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer log.Close()
	for i := 0; i < count; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), hangBound)
		h, err := sem.AcquireSlot(ctx, req())
		cancel()
		if err != nil {
			return err
		}
		slot := h.(lock.SlotHandle).Slot()
		if _, err := fmt.Fprintf(log, "enter %d %d %d\n", os.Getpid(), slot, h.Fence()); err != nil {
			return err
		}
		time.Sleep(time.Duration(rand.IntN(20000)) * time.Microsecond)
		if _, err := fmt.Fprintf(log, "leave %d %d\n", os.Getpid(), slot); err != nil {
			return err
		}
		if err := h.Release(); err != nil {
			return err
		}
	}
	return nil
}

// holdOne takes a place, says which on stdout ("held slot token"), and
// keeps it until stdin is closed.
func holdOne(sem lock.Semaphore, req func() *lock.Request) error {
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	h, err := sem.AcquireSlot(ctx, req())
	cancel()
	if err != nil {
		return err
	}
	fmt.Printf("held %d %d\n", h.(lock.SlotHandle).Slot(), h.Fence())
	var b [1]byte
	os.Stdin.Read(b[:])
	return h.Release()
}

// Holder is a worker holding a place until Release.
type Holder struct {
	Slot  int
	Token uint64
	cmd   *exec.Cmd
	stdin interface{ Close() error }
}

// StartHolder starts a worker that takes a place in the semaphore of
// slots at target and waits until it holds it. env is added to its
// environment (where the server is).
func StartHolder(t testing.TB, target string, slots int, env ...string) *Holder {
	t.Helper()
	cmd := testenv.Command(append([]string{roleEnv + "=hold", targetEnv + "=" + target, slotsEnv + "=" + strconv.Itoa(slots)}, env...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &Holder{cmd: cmd, stdin: stdin}
	t.Cleanup(func() { h.Release() })
	timer := time.AfterFunc(hangBound, func() { cmd.Process.Kill() })
	defer timer.Stop()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if _, serr := fmt.Sscanf(line, "held %d %d", &h.Slot, &h.Token); err != nil || serr != nil {
		t.Fatalf("holder of %s gave no place (%q, %v)", target, line, err)
	}
	return h
}

// PID is the holder's process id.
func (h *Holder) PID() int { return h.cmd.Process.Pid }

// Release has the holder release its place and exit.
func (h *Holder) Release() error {
	if h.cmd.ProcessState != nil {
		return nil
	}
	h.stdin.Close()
	timer := time.AfterFunc(hangBound, func() { h.cmd.Process.Kill() })
	defer timer.Stop()
	return h.cmd.Wait()
}

// Kill kills the holder with SIGKILL and reaps it.
func (h *Holder) Kill() {
	if h.cmd.ProcessState != nil {
		return
	}
	h.cmd.Process.Kill()
	h.cmd.Wait()
}

// StressConfig says how hard Stress presses a semaphore.
type StressConfig struct {
	Target  string
	Slots   int
	Workers int
	// Each is how many acquisitions each worker completes; a killed
	// worker's are completed by the one started in its place.
	Each int
	// Kills is how many holders are killed with SIGKILL along the way.
	Kills int
	// Env is added to every worker's environment.
	Env []string
	// AfterKill, when set, runs once a killed holder is reaped, before
	// its kill is logged: what an operator could do to free its place
	// early (for etcd, deleting its key). A holder whose place waits for
	// the server to notice (a lease's TTL) frees it later on its own.
	AfterKill func(t testing.TB, pid int)
}

// Stress runs the workers, kills holders among them, and checks the log:
// never more than Slots inside at once, never two holders in one place,
// places within 0..Slots-1, tokens never repeated, and every acquisition
// completed.
func Stress(t *testing.T, c StressConfig) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "log")
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append([]string{roleEnv + "=stress", targetEnv + "=" + c.Target, slotsEnv + "=" + strconv.Itoa(c.Slots), logEnv + "=" + logPath}, c.Env...)

	var mu sync.Mutex
	live := map[int]*exec.Cmd{} // pid -> worker
	assigned := map[int]int{}   // pid -> acquisitions it was to complete
	var wg sync.WaitGroup
	var failed []string
	var start func(count int)
	start = func(count int) {
		cmd := testenv.Command(append(env, countEnv+"="+strconv.Itoa(count))...)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Error(err)
			return
		}
		mu.Lock()
		live[cmd.Process.Pid] = cmd
		assigned[cmd.Process.Pid] = count
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			timer := time.AfterFunc(hangBound, func() { cmd.Process.Kill() })
			err := cmd.Wait()
			timer.Stop()
			mu.Lock()
			_, mine := live[cmd.Process.Pid]
			delete(live, cmd.Process.Pid)
			mu.Unlock()
			if mine && err != nil {
				mu.Lock()
				failed = append(failed, fmt.Sprintf("worker %d: %v", cmd.Process.Pid, err))
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < c.Workers; i++ {
		start(c.Each)
	}
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	kills := 0
	deadline := time.Now().Add(hangBound)
	for kills < c.Kills && time.Now().Before(deadline) {
		// A random pause, shorter as more kills are still to come.
		if rand.IntN(c.Workers) == 0 {
			time.Sleep(time.Duration(1+rand.IntN(10)) * time.Millisecond)
		}
		inside := replay(t, logPath, c.Slots).inside
		mu.Lock()
		var victim *exec.Cmd
		for pid := range inside {
			if cmd := live[pid]; cmd != nil {
				victim = cmd
				delete(live, pid) // its exit is expected
				break
			}
		}
		mu.Unlock()
		if victim == nil {
			mu.Lock()
			n := len(live)
			mu.Unlock()
			if n == 0 {
				break
			}
			time.Sleep(time.Millisecond)
			continue
		}
		// Stopped first, the victim writes nothing more; its kill is
		// logged before it dies, so before the protocol can free its
		// place and another can log its entry.
		pid := victim.Process.Pid
		victim.Process.Signal(syscall.SIGSTOP)
		for s := procState(pid); s != 'T' && s != 'Z' && s != 0; s = procState(pid) {
			time.Sleep(time.Millisecond)
		}
		fmt.Fprintf(log, "kill %d\n", pid)
		victim.Process.Kill()
		for s := procState(pid); s != 'Z' && s != 0; s = procState(pid) {
			time.Sleep(time.Millisecond)
		}
		if c.AfterKill != nil {
			c.AfterKill(t, pid)
		}
		kills++
		mu.Lock()
		left := assigned[pid] - replay(t, logPath, c.Slots).left[pid]
		mu.Unlock()
		start(left)
	}
	wg.Wait()
	for _, f := range failed {
		t.Error(f)
	}
	r := replay(t, logPath, c.Slots)
	for _, p := range r.problems {
		t.Error(p)
	}
	if kills < c.Kills {
		t.Errorf("only %d of %d holders killed", kills, c.Kills)
	}
	if want := c.Workers * c.Each; r.completed < want {
		t.Errorf("%d acquisitions completed, want %d: some were lost", r.completed, want)
	}
	t.Logf("%d acquisitions, %d kills, at most %d inside at once", r.completed, kills, r.most)
}

// procState is the state letter of process pid in /proc (T stopped, Z
// dead but not reaped), 0 when it is gone.
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i > 0 && i+2 < len(s) {
		return s[i+2]
	}
	return 0
}

// replayed is what a log says.
type replayed struct {
	inside    map[int]int // pid -> place, inside now
	left      map[int]int // pid -> acquisitions completed
	completed int
	most      int
	problems  []string
}

// replay reads the log and checks it.
func replay(t testing.TB, logPath string, slots int) replayed {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	r := replayed{inside: map[int]int{}, left: map[int]int{}}
	byPlace := map[int]int{} // place -> pid
	tokens := map[uint64]bool{}
	for n, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		var pid, place int
		var token uint64
		bad := func(format string, a ...any) {
			r.problems = append(r.problems, fmt.Sprintf("log line %d %q: ", n+1, line)+fmt.Sprintf(format, a...))
		}
		switch {
		case strings.HasPrefix(line, "enter "):
			if _, err := fmt.Sscanf(line, "enter %d %d %d", &pid, &place, &token); err != nil {
				bad("%v", err)
				continue
			}
			if place < 0 || place >= slots {
				bad("place outside 0..%d", slots-1)
			}
			if other, ok := byPlace[place]; ok {
				bad("place %d is held by pid %d too", place, other)
			}
			if token != 0 && tokens[token] {
				bad("token %d handed out twice", token)
			}
			tokens[token] = true
			byPlace[place] = pid
			r.inside[pid] = place
			if len(r.inside) > slots {
				bad("%d inside at once, more than %d slots", len(r.inside), slots)
			}
			r.most = max(r.most, len(r.inside))
		case strings.HasPrefix(line, "leave "):
			if _, err := fmt.Sscanf(line, "leave %d %d", &pid, &place); err != nil {
				bad("%v", err)
				continue
			}
			if r.inside[pid] != place || byPlace[place] != pid {
				bad("leaves a place it does not hold")
			}
			delete(r.inside, pid)
			delete(byPlace, place)
			r.left[pid]++
			r.completed++
		case strings.HasPrefix(line, "kill "):
			if _, err := fmt.Sscanf(line, "kill %d", &pid); err != nil {
				bad("%v", err)
				continue
			}
			if place, ok := r.inside[pid]; ok {
				delete(byPlace, place)
				delete(r.inside, pid)
			}
		default:
			bad("unknown event")
		}
	}
	return r
}
