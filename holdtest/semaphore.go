package holdtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hold-dev/hold"
)

// The semaphore suite: RunSemaphore checks a protocol that implements
// lock.Semaphore (hold.Slots) with real processes:
//   - never more than N holders at once, and never two on one slot, with
//     16 workers taking a 4-slot semaphore 200 times each while holders are
//     killed with SIGKILL at random (500 kills), and no acquisition lost;
//   - with 3 of 4 slots held, a new request gets the fourth (how long it
//     took is logged; the figure belongs to a benchmark);
//   - a request with another N while a slot is held fails with
//     ErrSlotCount naming the N in use, and works once none is held;
//   - TryAcquire is busy only when every slot is held, naming every holder;
//   - fencing tokens rise across all slots;
//   - a killed holder's slot is free for the next request;
//   - a plain lock and the slots of one lock path never hold at once;
//   - Inspect shows N and each slot's holder.
//
// The workers are the test binary again, as for Run: pass the subject to
// RunWorker too. HOLD_TEST_SLOT_KILLS sets the number of kills of the
// first check (and -short makes it and the acquisitions fewer).

// slowSuffix names, beside the stress check's log, the file that tells its
// workers to stay inside longer: the kills lag behind the acquisitions,
// and a slow machine must still see every kill made before the work ends.
const slowSuffix = ".slow"

// Worker parameters of the semaphore checks.
const (
	slotsEnv = "HOLDTEST_SLOTS" // the N of hold.Slots
	// slotWorkerEnv names a stress worker in the log of stays: a name of its
	// own, as pids are reused (on Windows within moments), and a killed
	// worker's finished stays are counted by it.
	slotWorkerEnv = "HOLDTEST_SLOT_WORKER"
	// killsEnv sets how many holders the stress check kills.
	killsEnv = "HOLD_TEST_SLOT_KILLS"
)

// RunSemaphore checks that the protocol s describes keeps the promises of
// a semaphore (see above), each in a subtest named after it.
func RunSemaphore(t *testing.T, s Subject) {
	opts, closeFn, err := s.options()
	if err != nil {
		t.Fatalf("%s: options: %v", s.Name, err)
	}
	t.Cleanup(closeFn)
	c := &checker{s: s, opts: opts}
	t.Run("AtMostN", c.atMostN)
	t.Run("FirstFree", c.firstFree)
	t.Run("SlotCount", c.slotCount)
	t.Run("TryBusy", c.slotsBusy)
	t.Run("Tokens", c.slotTokens)
	t.Run("Crash", c.slotCrash)
	t.Run("PlainExcluded", c.plainExcluded)
	t.Run("Inspect", c.slotInspect)
}

// slotReport is what a semaphore worker prints: each acquisition's slot
// and token when it is inside ("in"), and when it is about to leave
// ("out").
type slotReport struct {
	PID   int    `json:"pid"`
	Event string `json:"event"`
	Slot  int    `json:"slot"`
	Token uint64 `json:"token,omitempty"`
	Err   string `json:"err,omitempty"`
}

// slotWork runs the semaphore roles: "slots" takes the semaphore n times,
// logging each stay inside; "slothold" holds a slot until standard input
// closes.
func (s Subject) slotWork(role string, opts []hold.Option) (int, bool) {
	n, _ := strconv.Atoi(os.Getenv(slotsEnv))
	opts = append(opts, hold.Slots(n))
	target := os.Getenv(targetEnv)
	out := json.NewEncoder(os.Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), 10*hangBound)
	defer cancel()
	switch role {
	case "slots":
		times, _ := strconv.Atoi(os.Getenv(nEnv))
		log, err := os.OpenFile(os.Getenv(logEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "holdtest worker:", err)
			return 1, true
		}
		name := os.Getenv(slotWorkerEnv)
		for range times {
			l, err := hold.Acquire(ctx, target, opts...)
			if err != nil {
				out.Encode(slotReport{PID: os.Getpid(), Event: "error", Err: err.Error()})
				return 1, true
			}
			r := slotReport{PID: os.Getpid(), Event: "in", Slot: l.Slot(), Token: l.Token()}
			// The log is appended to by every worker, one write a line,
			// so its order is the order of the stays inside.
			fmt.Fprintf(log, "in %s %d %d\n", name, r.Slot, r.Token)
			out.Encode(r)
			// Long enough for the stress check to find holders inside;
			// longer while it asks (slowFile: its kills lag behind).
			stay := 2 * time.Millisecond
			if _, err := os.Stat(os.Getenv(logEnv) + slowSuffix); err == nil {
				stay = 50 * time.Millisecond
			}
			time.Sleep(stay)
			fmt.Fprintf(log, "out %s %d\n", name, r.Slot)
			r.Event = "out"
			out.Encode(r)
			if err := l.Release(); err != nil {
				out.Encode(slotReport{PID: os.Getpid(), Event: "error", Err: err.Error()})
				return 1, true
			}
		}
		return 0, true
	case "slothold":
		l, err := hold.Acquire(ctx, target, opts...)
		if err != nil {
			out.Encode(slotReport{PID: os.Getpid(), Event: "error", Err: err.Error()})
			return 1, true
		}
		out.Encode(slotReport{PID: os.Getpid(), Event: "in", Slot: l.Slot(), Token: l.Token()})
		io.ReadAll(io.LimitReader(os.Stdin, 1))
		l.Release()
		return 0, true
	}
	return 0, false
}

// slotHolder starts a worker holding one of n slots of target, and returns
// it with its report.
func (c *checker) slotHolder(t *testing.T, target string, n int) (*worker, slotReport) {
	t.Helper()
	w := c.s.start(t, "slothold", targetEnv+"="+target, slotsEnv+"="+strconv.Itoa(n))
	var r slotReport
	timer := time.AfterFunc(hangBound, func() { w.cmd.Process.Kill() })
	defer timer.Stop()
	if !w.out.Scan() {
		t.Fatalf("slot holder gave no report")
	}
	if err := json.Unmarshal(w.out.Bytes(), &r); err != nil || r.Event != "in" {
		t.Fatalf("slot holder did not get a slot: %s", w.out.Bytes())
	}
	return w, r
}

// stressCounts returns the stress check's workers, acquisitions each and
// kills.
func stressCounts() (workers, each, kills int) {
	workers, each, kills = 16, 200, 500
	if testing.Short() {
		each, kills = 25, 50
	}
	if v, err := strconv.Atoi(os.Getenv(killsEnv)); err == nil && v >= 0 {
		kills = v
	}
	return workers, each, kills
}

// atMostN: 16 workers share 4 slots, 200 acquisitions each, while holders
// are killed at random; the log of stays inside must never show more than
// 4 inside, nor two on one slot, the tokens of each slot must rise, and
// every acquisition must be made (a killed worker's remaining ones by a
// new worker).
//
// A killed holder's stay ends, for the replay of the log, at the "kill"
// line the test writes just before the kill: its slot is free only once
// it is dead, a moment later, so the replay could miss an overlap only in
// that moment, one kill at a time.
func (c *checker) atMostN(t *testing.T) {
	if c.s.StressSkip != "" {
		t.Skip(c.s.StressSkip)
	}
	const n = 4
	workers, each, kills := stressCounts()
	target := c.s.target(t)
	logPath := filepath.Join(t.TempDir(), "stays")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()

	type running struct {
		w      *worker
		quota  int // acquisitions to make
		left   int // of them, still to make, as its reports say
		pid    int
		name   string // in the log (slotWorkerEnv)
		inside bool
		done   chan error
	}
	// A killed worker's acquisitions are counted from the log, where its
	// "out" lines are: the report on its output may have been cut short.
	outsOf := logOuts(logPath)
	var mu sync.Mutex
	var all []*running
	start := func(left int) *running {
		name := fmt.Sprint("w", len(all))
		w := c.s.start(t, "slots", targetEnv+"="+target, slotsEnv+"="+strconv.Itoa(n),
			logEnv+"="+logPath, nEnv+"="+strconv.Itoa(left), slotWorkerEnv+"="+name)
		r := &running{w: w, quota: left, left: left, pid: w.cmd.Process.Pid, name: name, done: make(chan error, 1)}
		// The goroutine below owns w's output until the worker exits. If
		// the check fails first, w's own clean-up (which reads the rest of
		// that output) must not run beside it: this one, registered later,
		// runs first, kills the worker and waits for the goroutine.
		finished := make(chan struct{})
		t.Cleanup(func() {
			select {
			case <-finished:
			default:
				w.cmd.Process.Kill()
				<-finished
			}
		})
		go func() {
			defer close(finished)
			var failure error
			for w.out.Scan() {
				var rep slotReport
				if json.Unmarshal(w.out.Bytes(), &rep) != nil {
					continue
				}
				mu.Lock()
				switch rep.Event {
				case "in":
					r.inside = true
				case "out":
					r.inside = false
					r.left--
				case "error":
					failure = errors.New(rep.Err)
				}
				mu.Unlock()
			}
			if err := w.wait(); failure == nil {
				failure = err
			}
			r.done <- failure
		}()
		return r
	}
	live := map[*running]bool{}
	for range workers {
		r := start(each)
		all = append(all, r)
		live[r] = true
	}
	killed := 0
	deadline := time.Now().Add(10 * hangBound)
	slow := false
	total := workers * each
	for len(live) > 0 {
		// Pace the work to the kills: while the share of kills made is
		// below the share of acquisitions made, the workers stay longer.
		done := 0
		mu.Lock()
		for _, r := range all {
			done += r.quota - r.left
		}
		mu.Unlock()
		if behind := killed < kills && done*kills >= killed*total; behind != slow {
			slow = behind
			if slow {
				os.WriteFile(logPath+slowSuffix, nil, 0o644)
			} else {
				os.Remove(logPath + slowSuffix)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stress check did not finish in %v: %d workers still run", 10*hangBound, len(live))
		}
		// Reap finished workers.
		for r := range live {
			select {
			case err := <-r.done:
				delete(live, r)
				if err != nil {
					t.Fatalf("worker %d failed: %v", r.pid, err)
				}
			default:
			}
		}
		if killed >= kills {
			time.Sleep(time.Millisecond)
			continue
		}
		// Kill a holder that is inside, if any is.
		var inside []*running
		mu.Lock()
		for r := range live {
			if r.inside && !r.w.killedByTest {
				inside = append(inside, r)
			}
		}
		mu.Unlock()
		if len(inside) == 0 {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		r := inside[rand.IntN(len(inside))]
		// Frozen first (where the system can), so that every line the
		// worker writes comes before its "kill" line: its reports on
		// stdout lag behind its log, and one that had left and come in
		// again between its last report and the kill would otherwise be
		// inside after its "kill" line, which the replay would take for
		// a second holder of its slot. A frozen holder keeps its slot
		// until it is killed, after the line.
		freeze(r.w.cmd.Process)
		fmt.Fprintf(logf, "kill %s\n", r.name)
		r.w.killedByTest = true
		r.w.cmd.Process.Kill()
		// The kill is complete when the worker is reaped (its reader
		// reports done, handled above); the next kill waits for it, so
		// that at most one killed holder is in its last moment.
		err := <-r.done
		_ = err
		delete(live, r)
		killed++
		if left := r.quota - outsOf(r.name); left > 0 {
			nr := start(left)
			all = append(all, nr)
			live[nr] = true
		}
	}
	outs := checkStays(t, logPath, n)
	if outs != workers*each {
		t.Errorf("%d acquisitions completed, want %d: some were lost", outs, workers*each)
	}
	if killed < kills {
		t.Errorf("only %d holders were killed, want %d", killed, kills)
	}
	t.Logf("%d workers × %d acquisitions of %d slots, %d holders killed, %d worker processes", workers, each, n, killed, len(all))
}

// logOuts returns a function that counts the "out" lines of a pid in the
// log at path, reading only what was appended since its last call.
func logOuts(path string) func(name string) int {
	var off int64
	var partial string
	outs := map[string]int{}
	return func(name string) int {
		if f, err := os.Open(path); err == nil {
			if _, err := f.Seek(off, io.SeekStart); err == nil {
				b, _ := io.ReadAll(f)
				off += int64(len(b))
				text := partial + string(b)
				lines := strings.Split(text, "\n")
				partial = lines[len(lines)-1]
				for _, l := range lines[:len(lines)-1] {
					if f := strings.Fields(l); len(f) >= 2 && f[0] == "out" {
						outs[f[1]]++
					}
				}
			}
			f.Close()
		}
		return outs[name]
	}
}

// checkStays replays the log of stays inside and fails on more than n
// inside at once, two on one slot, or a slot's tokens not rising; it
// returns the number of completed stays.
func checkStays(t *testing.T, path string, n int) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inside := map[string]string{} // worker -> slot
	onSlot := map[string]string{} // slot -> worker
	lastToken := map[string]uint64{}
	seen := map[uint64]bool{}
	outs, line := 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line++
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			t.Fatalf("line %d of the log is torn: %q", line, sc.Text())
		}
		who := fields[1]
		switch fields[0] {
		case "in":
			slot := fields[2]
			tok, _ := strconv.ParseUint(fields[3], 10, 64)
			if other, ok := onSlot[slot]; ok {
				t.Fatalf("line %d: worker %s entered slot %s, which worker %s holds", line, who, slot, other)
			}
			if len(inside) >= n {
				t.Fatalf("line %d: worker %s entered while %d were inside (%v): more than %d", line, who, len(inside), inside, n)
			}
			if tok != 0 {
				if tok <= lastToken[slot] || seen[tok] {
					t.Fatalf("line %d: token %d on slot %s after %d (or given twice): tokens must rise", line, tok, slot, lastToken[slot])
				}
				lastToken[slot], seen[tok] = tok, true
			}
			inside[who], onSlot[slot] = slot, who
		case "out":
			delete(onSlot, inside[who])
			delete(inside, who)
			outs++
		case "kill":
			if slot, ok := inside[who]; ok {
				delete(onSlot, slot)
				delete(inside, who)
			}
		}
	}
	return outs
}

// firstFree: with 3 of 4 slots held by other processes, a new request
// gets the fourth, without waiting for any of them.
func (c *checker) firstFree(t *testing.T) {
	target := c.s.target(t)
	held := map[int]bool{}
	for range 3 {
		_, r := c.slotHolder(t, target, 4)
		held[r.Slot] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	start := time.Now()
	l, err := hold.Acquire(ctx, target, c.with(hold.Slots(4))...)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Acquire with 3 of 4 slots held: %v (after %v)", err, took)
	}
	defer l.Release()
	if held[l.Slot()] {
		t.Fatalf("got slot %d, which a holder has", l.Slot())
	}
	t.Logf("the fourth slot (%d) was had in %v", l.Slot(), took)
}

// slotCount: another N while a slot is held fails at once with
// ErrSlotCount naming the N in use; once nothing is held it just works.
func (c *checker) slotCount(t *testing.T) {
	target := c.s.target(t)
	w, _ := c.slotHolder(t, target, 4)
	_, err := hold.TryAcquire(target, c.with(hold.Slots(3))...)
	if !errors.Is(err, hold.ErrSlotCount) || !strings.Contains(err.Error(), "4") {
		t.Fatalf("TryAcquire(Slots(3)) beside a holder of Slots(4) = %v; want ErrSlotCount naming 4", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	if _, err := hold.Acquire(ctx, target, c.with(hold.Slots(2))...); !errors.Is(err, hold.ErrSlotCount) {
		t.Fatalf("Acquire(Slots(2)) beside a holder of Slots(4) = %v; want ErrSlotCount at once", err)
	}
	w.wait()
	l, err := hold.Acquire(ctx, target, c.with(hold.Slots(3))...)
	if err != nil {
		t.Fatalf("Acquire(Slots(3)) with no slot held: %v", err)
	}
	l.Release()
}

// slotsBusy: TryAcquire is busy only when every slot is held, and then
// names every holder.
func (c *checker) slotsBusy(t *testing.T) {
	target := c.s.target(t)
	var pids []int
	for i := range 3 {
		_, r := c.slotHolder(t, target, 3)
		pids = append(pids, r.PID)
		if i < 2 {
			l, err := hold.TryAcquire(target, c.with(hold.Slots(3))...)
			if err != nil {
				t.Fatalf("TryAcquire with %d of 3 slots held: %v", i+1, err)
			}
			l.Release()
		}
	}
	_, err := hold.TryAcquire(target, c.with(hold.Slots(3))...)
	if !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("TryAcquire with every slot held = %v; want ErrBusy", err)
	}
	for _, pid := range pids {
		if !strings.Contains(err.Error(), strconv.Itoa(pid)) {
			t.Errorf("the busy error does not name holder %d: %v", pid, err)
		}
	}
}

// slotTokens: tokens rise across all slots, from holder to holder.
func (c *checker) slotTokens(t *testing.T) {
	if c.s.NoTokens != "" {
		t.Skip("no tokens: " + c.s.NoTokens)
	}
	target := c.s.target(t)
	_, r1 := c.slotHolder(t, target, 3)
	_, r2 := c.slotHolder(t, target, 3)
	if r2.Token <= r1.Token {
		t.Fatalf("slot %d's token %d after slot %d's %d: tokens must rise across slots", r2.Slot, r2.Token, r1.Slot, r1.Token)
	}
	l := c.acquire(t, target, hold.Slots(3))
	if l.Token() <= r2.Token {
		t.Fatalf("token %d after %d", l.Token(), r2.Token)
	}
	l.Release()
	l = c.acquire(t, target, hold.Slots(3))
	defer l.Release()
	if l.Token() <= r2.Token+1 {
		t.Fatalf("token %d after %d was released", l.Token(), r2.Token+1)
	}
}

// slotCrash: a killed holder's slot is free for the next request, whose
// token is above the killed one's.
func (c *checker) slotCrash(t *testing.T) {
	target := c.s.target(t)
	c.slotHolder(t, target, 2)
	w, r := c.slotHolder(t, target, 2)
	if l, err := hold.TryAcquire(target, c.with(hold.Slots(2))...); err == nil {
		l.Release()
		t.Fatal("TryAcquire got a third slot of two")
	}
	w.kill()
	ctx, cancel := context.WithTimeout(context.Background(), c.s.CrashFree+hangBound)
	defer cancel()
	l, err := hold.Acquire(ctx, target, c.with(hold.Slots(2))...)
	if err != nil {
		t.Fatalf("Acquire after a holder was killed: %v", err)
	}
	defer l.Release()
	if l.Slot() != r.Slot {
		t.Errorf("got slot %d; the killed holder's was %d, and the other is held", l.Slot(), r.Slot)
	}
	if c.s.NoTokens == "" && l.Token() <= r.Token {
		t.Errorf("token %d after the killed holder's %d", l.Token(), r.Token)
	}
}

// plainExcluded: a plain lock and the slots of one lock path never hold
// at once, either way round.
func (c *checker) plainExcluded(t *testing.T) {
	target := c.s.target(t)
	w, _ := c.slotHolder(t, target, 3)
	if l, err := hold.TryAcquire(target, c.opts...); err == nil {
		l.Release()
		t.Fatal("a plain TryAcquire got the lock while a slot of its semaphore was held")
	} else if !errors.Is(err, hold.ErrBusy) && !errors.Is(err, hold.ErrSlotCount) {
		t.Fatalf("plain TryAcquire beside a slot holder = %v; want ErrBusy or ErrSlotCount", err)
	}
	w.wait()
	wp, _ := c.holder(t, target)
	if l, err := hold.TryAcquire(target, c.with(hold.Slots(3))...); err == nil {
		l.Release()
		t.Fatal("TryAcquire(Slots(3)) got a slot while the plain lock was held")
	} else if !errors.Is(err, hold.ErrBusy) && !errors.Is(err, hold.ErrSlotCount) {
		t.Fatalf("TryAcquire(Slots(3)) beside a plain holder = %v; want ErrBusy or ErrSlotCount", err)
	}
	wp.wait()
	l := c.acquire(t, target, hold.Slots(3))
	l.Release()
}

// slotInspect: Inspect shows N and each slot's holder.
func (c *checker) slotInspect(t *testing.T) {
	target := c.s.target(t)
	_, r := c.slotHolder(t, target, 3)
	st, err := hold.Inspect(target, c.opts...)
	if err != nil {
		t.Fatal(err)
	}
	if st.Slots != 3 || len(st.SlotHolders) != 3 {
		t.Fatalf("Inspect: Slots %d with %d slot holders; want 3 and 3", st.Slots, len(st.SlotHolders))
	}
	h := st.SlotHolders[r.Slot]
	if h == nil || holderPIDOf(h) != r.PID {
		t.Fatalf("Inspect: slot %d's holder is %v; want pid %d", r.Slot, h, r.PID)
	}
	for k, h := range st.SlotHolders {
		if k != r.Slot && h != nil {
			t.Errorf("Inspect: slot %d is free but shows holder %v", k, h)
		}
	}
}

// holderPIDOf is the pid a holder names: its record's, or the kernel's.
func holderPIDOf(h *hold.Holder) int {
	if h.Owner != nil && h.Owner.PID != 0 {
		return h.Owner.PID
	}
	if len(h.PIDs) > 0 {
		return h.PIDs[0]
	}
	return 0
}
