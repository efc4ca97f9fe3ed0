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
	"bytes"
	"context"
	"fmt"
	"io"
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

// hangBound bounds every wait of a test, only to catch hangs, and
// runBound a stress worker's whole run.
const (
	hangBound = 2 * time.Minute
	runBound  = 20 * time.Minute
)

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
	stdin, stdout := testenv.StartPiped(t, cmd)
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
// places within 0..Slots-1, tokens never repeated and rising from holder
// to holder of each place, and every acquisition completed.
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
			timer := time.AfterFunc(runBound, func() { cmd.Process.Kill() })
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
	rep := newReplay(logPath, c.Slots)
	deadline := time.Now().Add(runBound)
	for kills < c.Kills && time.Now().Before(deadline) {
		// A random pause, shorter as more kills are still to come.
		if rand.IntN(c.Workers) == 0 {
			time.Sleep(time.Duration(1+rand.IntN(10)) * time.Millisecond)
		}
		inside := rep.advance(t).inside
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
		left := assigned[pid] - rep.advance(t).left[pid]
		mu.Unlock()
		start(left)
	}
	wg.Wait()
	for _, f := range failed {
		t.Error(f)
	}
	r := rep.advance(t)
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

// replayed is what a log says, read as it grows.
type replayed struct {
	path      string
	slots     int
	offset    int64
	n         int         // lines read
	inside    map[int]int // pid -> place, inside now
	left      map[int]int // pid -> acquisitions completed
	byPlace   map[int]int // place -> pid
	tokens    map[uint64]bool
	last      map[int]uint64 // place -> its last holder's token
	completed int
	most      int
	problems  []string
}

func newReplay(path string, slots int) *replayed {
	return &replayed{path: path, slots: slots, inside: map[int]int{}, left: map[int]int{},
		byPlace: map[int]int{}, tokens: map[uint64]bool{}, last: map[int]uint64{}}
}

// advance reads and checks the lines written since the last call.
func (r *replayed) advance(t testing.TB) *replayed {
	t.Helper()
	f, err := os.Open(r.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, r.offset, 1<<40))
	if err != nil {
		t.Fatal(err)
	}
	end := bytes.LastIndexByte(b, '\n') + 1 // whole lines only
	r.offset += int64(end)
	for _, line := range strings.Split(string(b[:end]), "\n") {
		if line != "" {
			r.n++
			r.line(line)
		}
	}
	return r
}

// line checks one event.
func (r *replayed) line(line string) {
	bad := func(format string, a ...any) {
		r.problems = append(r.problems, fmt.Sprintf("log line %d %q: ", r.n, line)+fmt.Sprintf(format, a...))
	}
	f := strings.Fields(line)
	nums := make([]int64, len(f))
	for i := 1; i < len(f); i++ {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			bad("%v", err)
			return
		}
		nums[i] = v
	}
	want := map[string]int{"enter": 4, "leave": 3, "kill": 2}
	if len(f) == 0 || want[f[0]] != len(f) {
		bad("unknown event")
		return
	}
	pid := int(nums[1])
	switch f[0] {
	case "enter":
		place, token := int(nums[2]), uint64(nums[3])
		if place < 0 || place >= r.slots {
			bad("place outside 0..%d", r.slots-1)
		}
		if other, ok := r.byPlace[place]; ok {
			bad("place %d is held by pid %d too", place, other)
		}
		if token != 0 && r.tokens[token] {
			bad("token %d handed out twice", token)
		}
		if token != 0 && token <= r.last[place] {
			bad("token %d on place %d after its holder's %d: tokens must rise", token, place, r.last[place])
		}
		r.tokens[token] = true
		r.last[place] = token
		r.byPlace[place] = pid
		r.inside[pid] = place
		if len(r.inside) > r.slots {
			bad("%d inside at once, more than %d slots", len(r.inside), r.slots)
		}
		r.most = max(r.most, len(r.inside))
	case "leave":
		place := int(nums[2])
		if got, ok := r.inside[pid]; !ok || got != place || r.byPlace[place] != pid {
			bad("leaves a place it does not hold")
		}
		delete(r.inside, pid)
		delete(r.byPlace, place)
		r.left[pid]++
		r.completed++
	case "kill":
		if place, ok := r.inside[pid]; ok {
			delete(r.byPlace, place)
			delete(r.inside, pid)
		}
	}
}
