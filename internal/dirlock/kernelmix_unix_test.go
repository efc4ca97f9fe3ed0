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
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/lock"
)

// A kernel holder (the default protocol, hold.Acquire's and `hold run`'s)
// and a portable contender on one lock path, for every way between them:
// a kernel holder that holds past the portable stale time, a released
// record that a kernel holder takes in the instant a portable reclaim
// judged it free, a kernel waiter that opened the file the portable
// reclaim is removing, and a crash of either side. Every holder logs its
// entry into and exit from the section the lock guards in one overlap log,
// and proves on entry that nobody else is inside (criticalSection's
// marker); the tests assert from both that two never held at once.

// The worker role "mix" takes the lock with the protocol envKind names,
// envIters times (1 when unset), and holds it each time for envDwell
// milliseconds, or until stdin closes when envDwell is unset. At the fault
// point envPause it prints "at POINT" and waits for a line on stdin; at
// those of envFaults it dies (see faults).
const (
	envKind  = "HOLD_DIRLOCK_KIND" // "kernel" or "portable"
	envDwell = "HOLD_DIRLOCK_DWELL"
	envPause = "HOLD_DIRLOCK_PAUSE"
	// envMixRounds sets TestKernelPortableAlternations' rounds (its
	// default is CI's, a few seconds' worth).
	envMixRounds = "HOLD_TEST_MIX_ROUNDS"
)

// mixEnv is the portable side's timing in these tests: a stale time far
// shorter than the kernel holders hold, so that the age rule, were it
// applied to them, would take their locks.
var mixEnv = fastEnv

func workerMix(target string) int {
	iters, _ := strconv.Atoi(os.Getenv(envIters))
	iters = max(iters, 1)
	dwell, timed := time.Duration(0), os.Getenv(envDwell) != ""
	if timed {
		ms, _ := strconv.Atoi(os.Getenv(envDwell))
		dwell = time.Duration(ms) * time.Millisecond
	}
	kind := os.Getenv(envKind)
	in := bufio.NewReader(os.Stdin)
	f := parseFaults(os.Getenv(envFaults), target+".deaths")
	pause := os.Getenv(envPause)
	p := New(Config{})
	p.fault = func(point string) {
		if point == pause {
			pause = "" // once
			fmt.Println("at " + point)
			in.ReadString('\n')
		}
		f.hit(point)
	}
	path := target + ".lock"
	for range iters {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		var h lock.Handle
		var err error
		if kind == "kernel" {
			h, err = kernelAcquire(ctx, path)
		} else {
			req := request(path)
			req.Logger = waitingLogger()
			h, err = p.Acquire(ctx, req)
		}
		cancel()
		if err != nil {
			fmt.Fprintln(os.Stderr, "acquire:", err)
			return 2
		}
		fmt.Println("held")
		if code := enterSection(target, kind); code != 0 {
			return code
		}
		f.hit("cs")
		if timed {
			time.Sleep(dwell)
		} else {
			io.Copy(io.Discard, in)
		}
		leaveSection(target, kind)
		if err := h.Check(); err != nil {
			fmt.Fprintln(os.Stderr, "check before release:", err)
			return 4
		}
		if err := h.Release(); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			return 4
		}
		fmt.Println("released")
	}
	return 0
}

// kernelAcquire takes the kernel lock at path, waiting. A kernel waiter
// that meets a portable lock directory is refused (the kernel protocol
// does not wait on the portable one): it tries again until the directory
// is gone, as a user would.
func kernelAcquire(ctx context.Context, path string) (lock.Handle, error) {
	for {
		req := request(path)
		req.Logger = waitingLogger()
		h, err := flock.Protocol{}.Acquire(ctx, req)
		if err == nil || !errors.Is(err, lock.ErrNotRegular) {
			return h, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitingLogger prints "waiting" when an acquisition starts to wait.
func waitingLogger() *slog.Logger { return slog.New(waitingHandler{}) }

type waitingHandler struct{}

func (waitingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (waitingHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "hold: waiting for lock" {
		fmt.Println("waiting")
	}
	return nil
}
func (h waitingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h waitingHandler) WithGroup(string) slog.Handler      { return h }

// enterSection proves that nobody else is inside (the marker of
// criticalSection, whose live owner is a second holder), then logs the
// entry. Exit 3 reports two holders at once.
func enterSection(target, kind string) int {
	if code := takeMarker(target+".marker", target, func(pid int) string {
		return fmt.Sprintf("%s %d entered while %d was inside\n", kind, os.Getpid(), pid)
	}); code != 0 {
		return code
	}
	overlapLog(target, "enter", kind)
	return 0
}

func leaveSection(target, kind string) {
	overlapLog(target, "leave", kind)
	os.Remove(target + ".marker")
}

func overlapLog(target, what, kind string) {
	f, err := os.OpenFile(target+".overlap", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s %d %s\n", what, os.Getpid(), kind)
	f.Close()
}

// checkOverlap asserts from the overlap log (and the workers' own
// violation report) that no two holders were ever inside at once. A
// holder the test killed may have died inside: the next entry ends its
// stay. It returns the entries, in order, as "kind pid".
func checkOverlap(t *testing.T, target string, killed map[int]bool) []string {
	t.Helper()
	if b, err := os.ReadFile(target + ".violation"); err == nil {
		t.Fatalf("two holders at once: %s", b)
	}
	b, err := os.ReadFile(target + ".overlap")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var entries []string
	inside := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		fs := strings.Fields(line)
		if len(fs) != 3 {
			continue
		}
		pid, _ := strconv.Atoi(fs[1])
		switch fs[0] {
		case "enter":
			if inside != 0 && !killed[inside] {
				t.Fatalf("overlap log: %s %d entered while %d was inside\n%s", fs[2], pid, inside, b)
			}
			inside = pid
			entries = append(entries, fs[2]+" "+fs[1])
		case "leave":
			if inside != pid {
				t.Fatalf("overlap log: %d left while %d was inside\n%s", pid, inside, b)
			}
			inside = 0
		}
	}
	return entries
}

// mixWorker starts a "mix" worker of kind with extra env.
func mixWorker(t *testing.T, target, kind string, env ...string) *worker {
	t.Helper()
	return startWorker(t, "mix", append(append([]string{envTarget + "=" + target, envKind + "=" + kind}, mixEnv...), env...)...)
}

// finish closes a holder's stdin and waits for it to release and exit 0.
func finish(t *testing.T, w *worker) {
	t.Helper()
	w.stdin.Close()
	w.expect(t, "released")
	if err := w.wait(t); err != nil {
		t.Fatalf("%s worker: %v\n%s", w.cmd.Env[len(w.cmd.Env)-1], err, w.stderr)
	}
}

// mixTarget returns a fresh target and the stale time of mixEnv.
func mixTarget(t *testing.T) (string, time.Duration) {
	return filepath.Join(t.TempDir(), "job"), fastConfig().Stale
}

// A kernel holder that holds far past the portable stale time: its lock
// file's record never gets younger, and the portable waiter must wait
// for it all the same, then get the lock when it lets go.
func TestKernelHolderLivePastStale(t *testing.T) {
	target, stale := mixTarget(t)
	kernel := mixWorker(t, target, "kernel")
	kernel.expect(t, "held")
	portable := mixWorker(t, target, "portable")
	portable.expect(t, "waiting")
	time.Sleep(5 * stale)
	if fi, err := os.Lstat(target + ".lock"); err != nil || !fi.Mode().IsRegular() || time.Since(fi.ModTime()) < stale {
		t.Fatalf("the kernel holder's lock file should be older than the stale time by now: %v %v", fi, err)
	}
	if e := checkOverlap(t, target, nil); len(e) != 1 {
		t.Fatalf("entries while the kernel holder held: %v", e)
	}
	// Judged as a live holder, named by the kernel.
	st, err := New(fastConfig()).Inspect(target + ".lock")
	if err != nil || st.State != lock.HeldExclusive || st.Holder == nil || !containsPID(st.Holder.PIDs, kernel.cmd.Process.Pid) {
		t.Fatalf("Inspect of a held kernel lock: %+v, %v; want held by pid %d", st, err, kernel.cmd.Process.Pid)
	}
	finish(t, kernel)
	portable.expect(t, "held")
	finish(t, portable)
	if e := checkOverlap(t, target, nil); len(e) != 2 || !strings.HasPrefix(e[0], "kernel") || !strings.HasPrefix(e[1], "portable") {
		t.Fatalf("entries %v, want the kernel holder's, then the portable one's", e)
	}
}

func containsPID(pids []int, pid int) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// leaveReleasedRecord has a kernel holder take and release the lock, which
// leaves a released record in the lock file.
func leaveReleasedRecord(t *testing.T, target string) {
	t.Helper()
	w := mixWorker(t, target, "kernel", envDwell+"=0")
	w.expect(t, "released")
	if err := w.wait(t); err != nil {
		t.Fatalf("kernel worker: %v\n%s", err, w.stderr)
	}
	if _, ok := releasedRecord(target + ".lock"); !ok {
		b, _ := os.ReadFile(target + ".lock")
		t.Fatalf("no released record after a kernel holder: %q", b)
	}
	os.Remove(target + ".overlap")
}

// A released record, judged free by a portable reclaim, is taken by a
// kernel holder before the reclaim removes it: the reclaim must find the
// kernel lock held and wait, not remove the holder's file.
func TestKernelHolderInReclaimWindow(t *testing.T) {
	target, _ := mixTarget(t)
	leaveReleasedRecord(t, target)
	portable := mixWorker(t, target, "portable", envPause+"="+faultJudged)
	portable.expect(t, "at "+faultJudged)
	kernel := mixWorker(t, target, "kernel")
	kernel.expect(t, "held")
	fmt.Fprintln(portable.stdin)
	portable.expect(t, "waiting")
	if e := checkOverlap(t, target, nil); len(e) != 1 {
		t.Fatalf("entries while the kernel holder held: %v", e)
	}
	finish(t, kernel)
	portable.expect(t, "held")
	finish(t, portable)
	checkOverlap(t, target, nil)
}

// A kernel waiter that opened the lock file the portable reclaim is
// removing, and waits in the kernel for its lock: the reclaim holds that
// lock while it removes the file, so the waiter gets it only on a file
// that is gone, finds it replaced and starts over on what the path holds
// then: the portable holder's directory, or, if it came first, a lock file
// of its own, which the portable contender then waits for. Either way one
// holder at a time.
func TestKernelWaiterDuringReclaim(t *testing.T) {
	target, _ := mixTarget(t)
	leaveReleasedRecord(t, target)
	portable := mixWorker(t, target, "portable", envPause+"="+faultFileLocked)
	portable.expect(t, "at "+faultFileLocked)
	kernel := mixWorker(t, target, "kernel")
	kernel.expect(t, "waiting")
	// Let the waiter reach its blocking flock(2) (sooner or later is
	// the same to the protocol; this makes the case the test is about
	// the likely one).
	time.Sleep(200 * time.Millisecond)
	fmt.Fprintln(portable.stdin)
	first, second := firstHeld(t, portable, kernel)
	time.Sleep(200 * time.Millisecond)
	if e := checkOverlap(t, target, nil); len(e) != 1 {
		t.Fatalf("entries while the first holder held: %v", e)
	}
	finish(t, first)
	second.expect(t, "held")
	finish(t, second)
	checkOverlap(t, target, nil)
}

// firstHeld waits until one of a and b prints "held", and returns it
// first.
func firstHeld(t *testing.T, a, b *worker) (first, second *worker) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line, ok := <-a.lines:
			if !ok {
				t.Fatalf("worker exited: %s", a.stderr)
			}
			if line == "held" {
				return a, b
			}
		case line, ok := <-b.lines:
			if !ok {
				t.Fatalf("worker exited: %s", b.stderr)
			}
			if line == "held" {
				return b, a
			}
		case <-timeout:
			t.Fatalf("nobody held within 60s:\n%s\n%s", a.stderr, b.stderr)
		}
	}
}

// Crashes: a kernel holder killed while it holds leaves its record with
// a dead pid and no kernel lock, which the portable waiter takes (at
// once: no age rule needed); a portable holder killed while it holds
// leaves a directory that the next portable contender reclaims, and the
// kernel contender waits for it meanwhile; a portable reclaimer killed
// while it holds a lock file's kernel lock, or once it moved the file
// aside, frees the way for the kernel waiter.
func TestKernelPortableCrashes(t *testing.T) {
	t.Run("kernel holder", func(t *testing.T) {
		target, _ := mixTarget(t)
		kernel := mixWorker(t, target, "kernel")
		kernel.expect(t, "held")
		portable := mixWorker(t, target, "portable")
		portable.expect(t, "waiting")
		kernel.cmd.Process.Kill()
		kernel.wait(t)
		portable.expect(t, "held")
		finish(t, portable)
		checkOverlap(t, target, map[int]bool{kernel.cmd.Process.Pid: true})
	})
	t.Run("portable holder", func(t *testing.T) {
		target, _ := mixTarget(t)
		portable := mixWorker(t, target, "portable")
		portable.expect(t, "held")
		kernel := mixWorker(t, target, "kernel")
		portable.cmd.Process.Kill()
		portable.wait(t)
		time.Sleep(100 * time.Millisecond)
		next := mixWorker(t, target, "portable", envDwell+"=100")
		// The portable contender reclaims the dead holder's directory;
		// the kernel contender, trying again meanwhile, may get the path
		// between that removal and the contender's mkdir. One, then the
		// other.
		first, second := firstHeld(t, next, kernel)
		finish(t, first)
		second.expect(t, "held")
		finish(t, second)
		checkOverlap(t, target, map[int]bool{portable.cmd.Process.Pid: true})
	})
	for _, point := range []string{faultFileLocked, faultReclaimMoved} {
		t.Run("portable reclaimer at "+point, func(t *testing.T) {
			target, _ := mixTarget(t)
			leaveReleasedRecord(t, target)
			portable := mixWorker(t, target, "portable", envFaults+"="+point+":1")
			if err := portable.wait(t); !killedBySignal(err) {
				t.Fatalf("portable worker did not die at %s: %v\n%s", point, err, portable.stderr)
			}
			kernel := mixWorker(t, target, "kernel")
			kernel.expect(t, "held")
			finish(t, kernel)
			checkOverlap(t, target, nil)
		})
	}
}

// Kernel and portable holders alternate on one target, many times, with
// random SIGKILLs of either: never two holders at once, and nothing left
// at the lock path but a lock file or a lock directory. CI runs a few
// rounds; HOLD_TEST_MIX_ROUNDS=200 runs the full trial.
func TestKernelPortableAlternations(t *testing.T) {
	rounds := 12
	if n, err := strconv.Atoi(os.Getenv(envMixRounds)); err == nil && n > 0 {
		rounds = n
	}
	target, _ := mixTarget(t)
	killed := map[int]bool{}
	kills := 0
	for round := range rounds {
		// Every fourth round the kernel holder holds past the portable
		// stale time.
		kernelDwell := "5"
		if round%4 == 3 {
			kernelDwell = strconv.Itoa(int(2 * fastConfig().Stale / time.Millisecond))
		}
		ws := []*worker{
			mixWorker(t, target, "kernel", envIters+"=3", envDwell+"="+kernelDwell),
			mixWorker(t, target, "portable", envIters+"=3", envDwell+"=5"),
		}
		if round%2 == 1 {
			ws[0], ws[1] = ws[1], ws[0]
		}
		if rand.IntN(3) > 0 {
			i := rand.IntN(2)
			victim := ws[i]
			time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond)
			victim.cmd.Process.Kill()
			killed[victim.cmd.Process.Pid] = true
			kills++
			if (i == 0) == (round%2 == 1) {
				// A portable holder killed holding leaves its directory,
				// which only the portable protocol reclaims (the kernel
				// one refuses a lock directory): another portable
				// contender comes, as one would.
				ws = append(ws, mixWorker(t, target, "portable", envDwell+"=5"))
			}
		}
		for _, w := range ws {
			if err := w.wait(t); err != nil && !killed[w.cmd.Process.Pid] {
				t.Fatalf("round %d: %v: %v\n%s", round, w.cmd.Env[len(w.cmd.Env)-1], err, w.stderr)
			}
		}
		checkOverlap(t, target, killed)
		checkLockPath(t, target+".lock")
	}
	entries := checkOverlap(t, target, killed)
	var k, p int
	for _, e := range entries {
		if strings.HasPrefix(e, "kernel") {
			k++
		} else {
			p++
		}
	}
	t.Logf("%d rounds, %d SIGKILLs, %d kernel and %d portable holds, no overlap", rounds, kills, k, p)
	if k == 0 || p == 0 {
		t.Fatalf("kernel holds %d, portable holds %d: both must have held", k, p)
	}
}

// checkLockPath asserts that what is at path is nothing, a plain lock file
// (empty or a record) or a lock directory.
func checkLockPath(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return
	case err != nil:
		t.Fatal(err)
	case fi.IsDir():
		if !IsLockDir(path) {
			t.Fatalf("a directory that is not a lock is at the lock path")
		}
	case fi.Mode().IsRegular():
		if why, err := foreignContent(path, fi); why != "" || err != nil {
			t.Fatalf("the lock file is not a lock's: %s %v", why, err)
		}
	default:
		t.Fatalf("a %v is at the lock path", fi.Mode())
	}
}

// A holder whose lock was taken from it between its release's ownership
// check and its move (the path now another holder's) must leave that
// holder's lock as it was: it neither writes its past record at the path
// (which would keep the other lock from going back) nor frees the gate
// before it has seen that what it moved is its own.
func TestReleaseAfterLossLeavesNextHolder(t *testing.T) {
	path := lockIn(t)
	// A released kernel record, so that the first holder continues its
	// token and has a past record to leave.
	if err := os.WriteFile(path, lock.AppendPastRecord(nil, 7, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fastConfig()
	cfg.Ungated = true
	p1, p2 := New(cfg), New(cfg)
	h1 := mustTake(t, p1, path)
	if h1.Fence() != 8 {
		t.Fatalf("fence %d, want 8 (continuing the released record's 7)", h1.Fence())
	}
	var h2 lock.Handle
	p1.fault = func(point string) {
		if point != faultReleaseVerified {
			return
		}
		// Another process (mis)judged the lock and took it over.
		if err := os.Rename(path, path+".elsewhere"); err != nil {
			t.Error(err)
		}
		h2 = mustTake(t, p2, path)
	}
	if err := h1.Release(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("release of a lock taken over: %v, want ErrLost", err)
	}
	if h2 == nil {
		t.Fatal("the fault point was not reached")
	}
	if err := h2.Check(); err != nil {
		t.Fatalf("the next holder's lock after the lost holder's release: %v", err)
	}
	if fi, err := os.Lstat(path); err != nil || !fi.IsDir() {
		t.Fatalf("the lock path after the lost holder's release: %v %v, want the next holder's directory", fi, err)
	}
}
