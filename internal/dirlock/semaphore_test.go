//go:build unix

package dirlock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/lock"
)

// Semaphore workers' settings.
const (
	envSlots = "HOLD_DIRLOCK_SLOTS" // the number of slots
	envDieAt = "HOLD_DIRLOCK_DIEAT" // die (SIGKILL) inside the section of this acquisition, 0-based; -1 never
	envID    = "HOLD_DIRLOCK_ID"    // the logical worker this process is a life of
)

func slotRequest(path string, n int) *lock.Request {
	r := request(path)
	r.Slots = n
	return r
}

func mustTakeSlot(t *testing.T, p *Protocol, path string, n int) lock.Handle {
	t.Helper()
	h, err := p.TryAcquireSlot(slotRequest(path, n))
	if err != nil {
		t.Fatalf("TryAcquireSlot(%d): %v", n, err)
	}
	t.Cleanup(func() { h.Release() })
	return h
}

func slotOf(h lock.Handle) int { return h.(lock.SlotHandle).Slot() }

// TestSemaphoreSlots: the slots go in order, tokens rise across them, a
// try with every slot held is busy naming every holder, a freed slot is
// taken again, and the semaphore reports what it holds.
func TestSemaphoreSlots(t *testing.T) {
	p := New(fastConfig())
	path := lockIn(t)
	var hs []lock.Handle
	var last uint64
	for i := range 3 {
		h := mustTakeSlot(t, p, path, 3)
		if got := slotOf(h); got != i {
			t.Fatalf("slot %d taken as the %d-th", got, i)
		}
		if h.Fence() <= last {
			t.Fatalf("token %d after %d", h.Fence(), last)
		}
		last = h.Fence()
		hs = append(hs, h)
	}
	_, err := p.TryAcquireSlot(slotRequest(path, 3))
	var e *lock.Error
	if !errors.As(err, &e) || !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("a fourth try: want ErrBusy, got %v", err)
	}
	for i := range 3 {
		if !strings.Contains(e.Hint, fmt.Sprintf("slot %d by pid %d", i, os.Getpid())) {
			t.Errorf("busy error does not name slot %d's holder: %v", i, err)
		}
	}
	st, err := p.InspectSlots(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Slots != 3 || len(st.SlotHolders) != 3 || st.State != lock.HeldShared || st.Fence != last {
		t.Fatalf("InspectSlots: %+v", st)
	}
	if err := hs[1].Release(); err != nil {
		t.Fatal(err)
	}
	h := mustTakeSlot(t, p, path, 3)
	if slotOf(h) != 1 || h.Fence() <= last {
		t.Fatalf("after slot 1's release: slot %d, token %d (last %d)", slotOf(h), h.Fence(), last)
	}
	if st, err := p.Inspect(path); err != nil || st.Slots != 3 {
		t.Fatalf("Inspect of a semaphore: %+v, %v", st, err)
	}
}

// TestSemaphorePlainRequest: on a semaphore's path a plain request is one
// for a semaphore of one: refused while slots of another number are
// held, and then holding the path against every number of slots.
func TestSemaphorePlainRequest(t *testing.T) {
	p := New(fastConfig())
	path := lockIn(t)
	h := mustTakeSlot(t, p, path, 3)
	_, err := p.TryAcquire(request(path))
	if !errors.Is(err, lock.ErrSlotCount) || !strings.Contains(err.Error(), "held with 3 slots, and a plain lock") {
		t.Fatalf("plain try beside a slot of 3: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := p.Acquire(ctx, request(path)); !errors.Is(err, lock.ErrSlotCount) {
		t.Fatalf("plain wait beside a slot of 3: %v", err)
	}
	h.Release()
	plain, err := p.Acquire(ctx, request(path))
	if err != nil {
		t.Fatalf("plain lock on an idle semaphore: %v", err)
	}
	defer plain.Release()
	if _, err := p.TryAcquire(request(path)); !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("a second plain holder: %v", err)
	}
	_, err = p.TryAcquireSlot(slotRequest(path, 3))
	if !errors.Is(err, lock.ErrSlotCount) || !strings.Contains(err.Error(), "held as a plain lock") {
		t.Fatalf("slots of 3 beside a plain holder: %v", err)
	}
	plain.Release()
	mustTakeSlot(t, p, path, 3)
}

// TestSemaphoreSlotCount: another number of slots while a slot is held
// fails naming the number in use, and takes nothing; with no slot held it
// just works, and tokens keep rising.
func TestSemaphoreSlotCount(t *testing.T) {
	p := New(fastConfig())
	path := lockIn(t)
	h := mustTakeSlot(t, p, path, 4)
	for _, n := range []int{2, 5} {
		_, err := p.TryAcquireSlot(slotRequest(path, n))
		if !errors.Is(err, lock.ErrSlotCount) || !strings.Contains(err.Error(), "held with 4 slots") {
			t.Fatalf("%d slots on a semaphore of 4: %v", n, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err = p.AcquireSlot(ctx, slotRequest(path, n))
		cancel()
		if !errors.Is(err, lock.ErrSlotCount) {
			t.Fatalf("waiting for %d slots on a semaphore of 4: %v", n, err)
		}
	}
	names, _ := readNames(path)
	for _, name := range names {
		if _, m, ok := parseSlotName(name); ok && m != 4 {
			t.Fatalf("a refused request left %s behind", name)
		}
	}
	last := h.Fence()
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	h2 := mustTakeSlot(t, p, path, 2)
	if h2.Fence() <= last {
		t.Fatalf("token %d after %d", h2.Fence(), last)
	}
	if st, _ := p.InspectSlots(path); st.Slots != 2 {
		t.Fatalf("Slots %d after a holder of 2", st.Slots)
	}
	h2.Release()
	if st, _ := p.InspectSlots(path); st.Slots != 2 || st.State != lock.Free {
		t.Fatalf("with none held: %+v", st)
	}
	// A plain lock is a semaphore of one.
	plain := lockIn(t)
	mustTake(t, p, plain)
	if _, err := p.TryAcquireSlot(slotRequest(plain, 3)); !errors.Is(err, lock.ErrSlotCount) {
		t.Fatalf("slots on a held plain lock: %v", err)
	}
}

// TestSemaphoreStaleSlotAndBreak: a dead holder's slot is taken over by
// the plain lock's rules, and Break removes stale slots, live ones only
// with force.
func TestSemaphoreStaleSlotAndBreak(t *testing.T) {
	p := New(fastConfig())
	path := lockIn(t)
	mustTakeSlot(t, p, path, 2).Release() // makes the semaphore
	dead := lock.Owner{PID: deadPID(t), Host: hostname(t), ID: "dead"}
	stamp(t, filepath.Join(path, slotName(0, 2)), dead)
	stamp(t, filepath.Join(path, slotName(1, 2)), dead)
	h := mustTakeSlot(t, p, path, 2)
	if slotOf(h) != 0 {
		t.Fatalf("took slot %d, want the stale slot 0", slotOf(h))
	}
	if _, err := lstat(filepath.Join(path, slotName(1, 2))); err == nil {
		os.RemoveAll(filepath.Join(path, slotName(1, 2))) // reclaimed on the way, or not: plant it afresh
	}
	stamp(t, filepath.Join(path, slotName(1, 2)), dead)
	if _, err := p.Break(path, false); err != nil {
		t.Fatalf("break of one stale slot: %v", err)
	}
	if _, err := lstat(filepath.Join(path, slotName(1, 2))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale slot 1 not broken: %v", err)
	}
	if _, err := p.Break(path, false); !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("break with a live slot only: %v", err)
	}
	if _, err := p.Break(path, true); err != nil {
		t.Fatal(err)
	}
	if err := h.Check(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("a forced break left the holder's lock: %v", err)
	}
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestSemaphoreNoWaitOnBusySlot: with every slot held and a waiter
// queued, freeing any slot (here a middle one, released; then another,
// its holder killed) gets the waiter that slot; and waiters are served in
// the order they came.
func TestSemaphoreNoWaitOnBusySlot(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "data")
	const n = 4
	env := []string{envTarget + "=" + target, envSlots + "=" + strconv.Itoa(n),
		EnvStale + "=10s", EnvGrace + "=150ms", EnvMaxPoll + "=20ms"}
	holders := make([]*worker, n)
	for i := range n {
		holders[i] = startWorker(t, "slothold", env...)
		holders[i].expect(t, "held "+strconv.Itoa(i))
	}
	first := startWorker(t, "slothold", env...)
	first.expect(t, "waiting")
	second := startWorker(t, "slothold", env...)
	second.expect(t, "entering")
	// Free slot 2: the first waiter must get it, the second must not.
	holders[2].stdin.Close()
	holders[2].expect(t, "released")
	first.expect(t, "held 2")
	p := New(fastConfig())
	st, err := p.InspectSlots(target + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	if h := st.SlotHolders[2]; h == nil || h.Owner == nil || h.Owner.PID != first.cmd.Process.Pid {
		t.Fatalf("slot 2 is not the first waiter's: %+v", h)
	}
	// Kill slot 1's holder: the second waiter takes it over.
	holders[1].cmd.Process.Kill()
	second.expect(t, "held 1")
	// 3 of 4 held (slot 0 freed now): a new request gets the fourth at once.
	holders[0].stdin.Close()
	holders[0].expect(t, "released")
	start := time.Now()
	h, err := p.TryAcquireSlot(slotRequest(target+".lock", n))
	if err != nil {
		t.Fatalf("3 of 4 held, a try: %v", err)
	}
	defer h.Release()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.Release()
	h, err = p.AcquireSlot(ctx, slotRequest(target+".lock", n))
	if err != nil {
		t.Fatalf("3 of 4 held, a wait: %v", err)
	}
	defer h.Release()
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("the free slot took %s", d) // a hang, not a speed claim
	}
	t.Logf("3 of 4 held: a try and a wait for the fourth took %s", time.Since(start))
}

// workerSlotHold takes a slot of SLOTS, prints "held I", and holds it
// until stdin closes. Before it waits it prints "entering", and once it
// sleeps at the front of the line "waiting".
func workerSlotHold(target string) int {
	n, _ := strconv.Atoi(os.Getenv(envSlots))
	p := New(Config{})
	req := slotRequest(target+".lock", n)
	var once sync.Once
	req.Logger = slog.New(slogFunc(func(msg string) {
		if msg == "hold: waiting for lock" {
			once.Do(func() { fmt.Println("waiting") })
		}
	}))
	fmt.Println("entering")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h, err := p.AcquireSlot(ctx, req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "acquire:", err)
		return 2
	}
	fmt.Println("held", slotOf(h))
	io.Copy(io.Discard, os.Stdin)
	if err := h.Release(); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		return 4
	}
	fmt.Println("released")
	return 0
}

// slogFunc is a slog handler that passes each message to a function.
type slogFunc func(msg string)

func (f slogFunc) Enabled(context.Context, slog.Level) bool      { return true }
func (f slogFunc) Handle(_ context.Context, r slog.Record) error { f(r.Message); return nil }
func (f slogFunc) WithAttrs([]slog.Attr) slog.Handler            { return f }
func (f slogFunc) WithGroup(string) slog.Handler                 { return f }

// TestSemaphoreStress is the stress at the protocol level: 16
// workers × 200 acquisitions of 4 slots, the holders killed (SIGKILL)
// inside the section at random, at least 500 times. Inside, each holder
// takes one of 4 kernel-locked seats without waiting, which the kernel
// frees the moment a holder dies: a fifth holder inside finds none and
// reports it. Every holder writes its pid, slot and token to a shared
// log, checked after: slots in range, tokens never given twice, and every
// acquisition of every worker done.
func TestSemaphoreStress(t *testing.T) {
	workers, iters, kills := 16, 200, 32
	if testing.Short() {
		workers, iters, kills = 8, 40, 8
	}
	const n = 4
	dir := t.TempDir()
	target := filepath.Join(dir, "data")
	// A killed holder's pid is gone, so its slot is stale at once whatever
	// the stale time; a generous one keeps a live holder that the loaded
	// machine starves of its heartbeats from calling its own slot lost.
	env := []string{envTarget + "=" + target, envSlots + "=" + strconv.Itoa(n),
		EnvStale + "=10s", EnvGrace + "=150ms", EnvMaxPoll + "=20ms"}
	var mu sync.Mutex
	killed := 0
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for id := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			left := kills
			for {
				done := countLines(doneLog(target, id))
				if done >= iters {
					if done != iters {
						errs <- fmt.Errorf("worker %d: %d acquisitions done, want %d", id, done, iters)
					}
					return
				}
				dieAt := -1
				if left > 0 {
					dieAt = rand.IntN(max(1, (iters-done)/left))
				}
				w := startWorker(t, "slots", append(env, envIters+"="+strconv.Itoa(iters-done),
					envDieAt+"="+strconv.Itoa(dieAt), envID+"="+strconv.Itoa(id))...)
				err := w.wait(t)
				switch {
				case killedBySignal(err) && dieAt >= 0:
					left--
					mu.Lock()
					killed++
					mu.Unlock()
				case err != nil:
					errs <- fmt.Errorf("worker %d: %v; stderr:\n%s", id, err, w.stderr)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if b, err := os.ReadFile(target + ".violation"); err == nil {
		t.Fatalf("more than %d holders inside at once: %s", n, b)
	}
	if killed < workers*kills {
		t.Errorf("%d holders killed, want %d", killed, workers*kills)
	}
	// The shared log: one line per section entered.
	f, err := os.Open(target + ".inside")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tokens := map[uint64]bool{}
	lines := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var pid, slot int
		var token uint64
		if _, err := fmt.Sscan(sc.Text(), &pid, &slot, &token); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if slot < 0 || slot >= n {
			t.Fatalf("pid %d held slot %d of %d", pid, slot, n)
		}
		if token == 0 || tokens[token] {
			t.Fatalf("token %d given twice (or none), pid %d", token, pid)
		}
		tokens[token] = true
		lines++
	}
	if want := workers*iters + killed; lines != want {
		t.Errorf("%d sections entered, want %d (%d acquisitions and %d kills)", lines, want, workers*iters, killed)
	}
	t.Logf("%d workers × %d acquisitions of %d slots, %d holders killed", workers, iters, n, killed)
}

func doneLog(target string, id int) string { return fmt.Sprintf("%s.done.%d", target, id) }

func countLines(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "\n")
}

// workerSlots acquires a slot of SLOTS ITERS times. Inside, it takes a
// free seat (see TestSemaphoreStress), logs itself to the shared log,
// dies at its DIEAT-th section, and otherwise logs the acquisition as
// done before it lets go. Exit 3 reports a fifth holder inside.
func workerSlots(target string) int {
	n, _ := strconv.Atoi(os.Getenv(envSlots))
	iters, _ := strconv.Atoi(os.Getenv(envIters))
	dieAt, _ := strconv.Atoi(os.Getenv(envDieAt))
	id, _ := strconv.Atoi(os.Getenv(envID))
	p := New(Config{})
	inside, err := os.OpenFile(target+".inside", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	done, err := os.OpenFile(doneLog(target, id), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for i := range iters {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		h, err := p.AcquireSlot(ctx, slotRequest(target+".lock", n))
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "acquire:", err)
			return 2
		}
		seat := takeSeat(target, n)
		if seat < 0 {
			os.WriteFile(target+".violation", []byte(fmt.Sprintf("pid %d found all %d seats taken\n", os.Getpid(), n)), 0o644)
			return 3
		}
		fmt.Fprintf(inside, "%d %d %d\n", os.Getpid(), slotOf(h), h.Fence())
		if i == dieAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
		syscall.Close(seat)
		fmt.Fprintln(done, 1)
		if err := h.Release(); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			return 4
		}
	}
	return 0
}

// takeSeat takes one of n kernel-locked seat files without waiting and
// returns its descriptor, -1 when all are taken.
func takeSeat(target string, n int) int {
	for i := range n {
		fd, err := syscall.Open(fmt.Sprintf("%s.seat.%d", target, i), syscall.O_RDWR|syscall.O_CREAT|syscall.O_CLOEXEC, 0o644)
		if err != nil {
			continue
		}
		if syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			return fd
		}
		syscall.Close(fd)
	}
	return -1
}

// TestSemaphoreFaultPoints: a holder of a slot killed at each step of
// taking, holding (gate.held: at the front of the line) and releasing it
// leaves the semaphore whole: both slots of 2 can be taken afterwards,
// by the rules of a plain lock (a stampless slot ages out, a dead
// holder's is taken at once, a tomb is litter).
func TestSemaphoreFaultPoints(t *testing.T) {
	for _, point := range []string{faultGateHeld, faultAfterMkdir, faultAfterStamp, faultAfterReadBack, faultReleaseVerified, faultReleaseMoved} {
		t.Run(point, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "data")
			w := startWorker(t, "slotfault", append([]string{envTarget + "=" + target, envSlots + "=2",
				envFaults + "=" + point + ":1"}, fastEnv...)...)
			if err := w.wait(t); !killedBySignal(err) {
				t.Fatalf("worker did not die at %s: %v\n%s", point, err, w.stderr)
			}
			p := New(fastConfig())
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			seen := map[int]bool{}
			for range 2 {
				h, err := p.AcquireSlot(ctx, slotRequest(target+".lock", 2))
				if err != nil {
					t.Fatalf("after a death at %s: %v", point, err)
				}
				defer h.Release()
				seen[slotOf(h)] = true
			}
			if len(seen) != 2 {
				t.Fatalf("slots taken: %v", seen)
			}
			if _, err := p.TryAcquireSlot(slotRequest(target+".lock", 2)); !errors.Is(err, lock.ErrBusy) {
				t.Fatalf("a third holder of 2 slots: %v", err)
			}
		})
	}
}

// workerSlotFault takes and releases a slot of SLOTS twice, dying where
// FAULTS says.
func workerSlotFault(target string) int {
	n, _ := strconv.Atoi(os.Getenv(envSlots))
	f := parseFaults(os.Getenv(envFaults), target+".deaths")
	p := New(Config{})
	p.fault = f.hit
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		h, err := p.AcquireSlot(ctx, slotRequest(target+".lock", n))
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "acquire:", err)
			return 2
		}
		if err := h.Release(); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			return 4
		}
	}
	return 0
}

// TestSemaphoreCountRace: a request for 2 slots that has looked for
// slots of other counts and found none, and a request for 3 that takes a
// slot right then, before the first takes its own: the first finds the
// other on its second look, gives its slot back and fails naming 3; the
// two never hold at once.
func TestSemaphoreCountRace(t *testing.T) {
	path := lockIn(t)
	// Ungated, as on two machines: one machine's gate lets one request
	// at a time look and take.
	cfg := fastConfig()
	cfg.Ungated = true
	a, b := New(cfg), New(cfg)
	var other lock.Handle
	var otherErr error
	a.fault = func(point string) {
		if point == faultSlotsScanned && other == nil && otherErr == nil {
			other, otherErr = b.TryAcquireSlot(slotRequest(path, 3))
		}
	}
	h, err := a.TryAcquireSlot(slotRequest(path, 2))
	if otherErr != nil {
		t.Fatalf("3 slots, first: %v", otherErr)
	}
	defer other.Release()
	if err == nil {
		h.Release()
		t.Fatal("holders of 2 and of 3 slots held at once")
	}
	if !errors.Is(err, lock.ErrSlotCount) || !strings.Contains(err.Error(), "held with 3 slots") {
		t.Fatalf("2 slots after 3 got in: %v", err)
	}
	if _, err := lstat(filepath.Join(path, slotName(0, 2))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused request kept its slot: %v", err)
	}
}

// TestSemaphorePatience: the Patience rule ends a wait on slots that stay
// with the same holders, and its error names them; a context ends a wait
// the same way.
func TestSemaphorePatience(t *testing.T) {
	path := lockIn(t)
	holder := New(fastConfig())
	mustTakeSlot(t, holder, path, 2)
	mustTakeSlot(t, holder, path, 2)
	cfg := fastConfig()
	cfg.Patience = 300 * time.Millisecond
	_, err := New(cfg).AcquireSlot(context.Background(), slotRequest(path, 2))
	if !errors.Is(err, lock.ErrTimeout) || !strings.Contains(err.Error(), "patience") || !strings.Contains(err.Error(), "all 2 slots are held") {
		t.Fatalf("patience: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = New(fastConfig()).AcquireSlot(ctx, slotRequest(path, 2))
	if !errors.Is(err, lock.ErrTimeout) || !strings.Contains(err.Error(), "all 2 slots are held") {
		t.Fatalf("deadline: %v", err)
	}
}

// TestSemaphoreAfterKernelLock: a kernel lock file at the path, held, is
// a plain lock (ErrSlotCount); released, it is taken over, and the
// semaphore's tokens continue the kernel lock's.
func TestSemaphoreAfterKernelLock(t *testing.T) {
	path := lockIn(t)
	k, err := flock.Protocol{}.TryAcquire(request(path))
	if err != nil {
		t.Fatal(err)
	}
	kernelToken := k.Fence()
	p := New(fastConfig())
	if _, err := p.TryAcquireSlot(slotRequest(path, 2)); !errors.Is(err, lock.ErrSlotCount) {
		t.Fatalf("slots on a held kernel lock: %v", err)
	}
	if err := k.Release(); err != nil {
		t.Fatal(err)
	}
	h := mustTakeSlot(t, p, path, 2)
	if h.Fence() <= kernelToken {
		t.Fatalf("token %d after the kernel lock's %d", h.Fence(), kernelToken)
	}
	// And the kernel protocol now refuses the semaphore's directory.
	if _, err := (flock.Protocol{}).TryAcquire(request(path)); err == nil || !strings.Contains(err.Error(), "portable") {
		t.Fatalf("kernel lock on a semaphore: %v", err)
	}
}
