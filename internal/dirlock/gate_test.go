//go:build unix

package dirlock

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/fairq"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/lock"
)

// logSink collects the debug messages of acquisitions.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(b)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func loggedRequest(path string, sink *logSink) *lock.Request {
	r := request(path)
	r.Logger = slog.New(slog.NewTextHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return r
}

// holdGate takes the front of path's waiting gate the way a waiter
// would, so an acquisition started afterwards must wait at the gate.
func holdGate(t *testing.T, path string) *fairq.Place {
	t.Helper()
	g, err := fairq.Front(context.Background(), request(path+GateSuffix), false)
	if err != nil {
		t.Fatalf("taking the gate: %v", err)
	}
	return g
}

// gateBusy reports whether anyone is queued at the gate of path.
func gateBusy(t *testing.T, path string) bool {
	t.Helper()
	return gateQueued(t, path) > 0
}

// gateFiles lists what the gate of path left on disk.
func gateFiles(t *testing.T, path string) []string {
	t.Helper()
	m, err := filepath.Glob(path + GateSuffix + "*")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// eventually polls cond (generously: only to catch a hang).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what, cond)
}

// Gated workers (processes) contending: the count is exact and the O_EXCL
// marker never finds two holders. The gate is shown in use (its queue
// exists), and nobody is left queued at it.
func TestGatedWorkersCount(t *testing.T) {
	const workers, iters = 8, 25
	target := filepath.Join(t.TempDir(), "counter")
	ws := make([]*worker, workers)
	for i := range ws {
		ws[i] = startWorker(t, "count", append([]string{envTarget + "=" + target, envIters + "=" + strconv.Itoa(iters)}, fastEnv...)...)
	}
	for i, w := range ws {
		if err := w.wait(t); err != nil {
			t.Fatalf("worker %d: %v\n%s", i, err, w.stderr)
		}
	}
	if n := checkCount(t, target); n != workers*iters {
		t.Fatalf("count %d, want %d", n, workers*iters)
	}
	if len(gateFiles(t, target+".lock")) == 0 {
		t.Fatal("the workers made no gate")
	}
	if gateBusy(t, target+".lock") {
		t.Fatal("a waiter is still queued at the gate")
	}
	if _, err := os.Lstat(target + ".lock"); !os.IsNotExist(err) {
		t.Fatalf("lock left behind: %v", err)
	}
}

// gateQueued is how many places the gate of path has taken: the holder's
// and its waiters'.
func gateQueued(t *testing.T, path string) int {
	t.Helper()
	n, err := fairq.Waiting(path + GateSuffix)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A waiter SIGKILLed while it sleeps at the gate, next in line behind the
// holder, does not wedge the waiter behind it: the kernel drops its place,
// and the next waiter takes the lock once the holder releases.
func TestKilledGateWaiterDoesNotWedge(t *testing.T) {
	target := filepath.Join(t.TempDir(), "counter")
	path := target + ".lock"
	p := New(fastConfig())
	h, err := p.TryAcquire(request(path))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	// The holder keeps its place at the front of the gate.
	if n := gateQueued(t, path); n != 1 {
		t.Fatalf("%d places at the gate with only the holder", n)
	}
	first := startWorker(t, "hold", append([]string{envTarget + "=" + target}, fastEnv...)...)
	eventually(t, "the first waiter queues behind the holder", func() bool { return gateQueued(t, path) == 2 })
	second := startWorker(t, "hold", append([]string{envTarget + "=" + target}, fastEnv...)...)
	eventually(t, "the second waiter queues behind it", func() bool { return gateQueued(t, path) == 3 })
	// Where the kernel lists blocked lock requests, see both waiters
	// asleep in the gate's queue before the first is killed.
	if n := blockedOn(t, gateQueue(path)); n >= 0 {
		eventually(t, "the waiters sleep at the gate", func() bool { return blockedOn(t, gateQueue(path)) >= 2 })
		t.Logf("the waiters sleep at the gate")
	}
	first.cmd.Process.Signal(syscall.SIGKILL)
	if err := first.wait(t); !killedBySignal(err) {
		t.Fatalf("first waiter: %v", err)
	}
	eventually(t, "the killed waiter's place is gone", func() bool { return gateQueued(t, path) == 2 })
	if err := h.Check(); err != nil {
		t.Fatalf("the holder's lock: %v", err)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	second.expect(t, "held")
	second.stdin.Close()
	second.expect(t, "released")
	eventually(t, "every place is given up", func() bool { return gateQueued(t, path) == 0 })
}

// A holder whose lock is broken (its directory removed, as `hold break`
// does) gives up its place at the gate at its next heartbeat, so a local
// waiter queued behind it takes the lock without the holder releasing.
func TestBrokenHolderLetsGateWaitersThrough(t *testing.T) {
	target := filepath.Join(t.TempDir(), "counter")
	path := target + ".lock"
	h, err := New(fastConfig()).TryAcquire(request(path))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	w := startWorker(t, "hold", append([]string{envTarget + "=" + target}, fastEnv...)...)
	eventually(t, "the waiter queues behind the holder", func() bool { return gateQueued(t, path) == 2 })
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	w.expect(t, "held")
	select {
	case <-h.Lost():
	default:
		t.Fatal("the waiter got through while the holder's Lost had not fired")
	}
	if err := h.Release(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Release of the broken lock: %v", err)
	}
	w.stdin.Close()
	w.expect(t, "released")
}

// The Patience/Ceiling rule holds for a waiter asleep on the gate: the
// lock changing hands every 40 ms behind the gate re-arms a 150 ms
// patience, the ceiling still ends the wait; a lock that stays with one
// holder ends it after the patience window. The waiter never gets past the
// gate (the test holds it), which its log shows: it never starts waiting
// on the directory. Once it gives up, its abandoned gate wait does not
// keep the gate.
func TestPatienceBehindGate(t *testing.T) {
	path := lockIn(t)
	g := holdGate(t, path)
	var sink logSink
	waited, err := patienceRule(t, path, func() *lock.Request { return loggedRequest(path, &sink) })
	if log := sink.String(); strings.Contains(log, "waiting for lock") || strings.Contains(log, "gate unusable") {
		t.Fatalf("the waiter got past a gate it could not have had:\n%s", log)
	}

	// The abandoned waits hand the gate straight on: once the test lets
	// go of it, it becomes free.
	g.Leave()
	eventually(t, "the gate is free", func() bool { return !gateBusy(t, path) })
	t.Logf("ceiling after %v; %v", waited.Round(time.Millisecond), err)
}

// The caller's context ends a wait on the gate, and the error names the
// directory's holder.
func TestContextEndsGateWait(t *testing.T) {
	path := lockIn(t)
	p := New(fastConfig())
	mustTake(t, p, path) // and with it the front of the gate
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := New(fastConfig()).Acquire(ctx, request(path))
	var e *lock.Error
	if !errors.Is(err, lock.ErrTimeout) || !errors.As(err, &e) || e.Holder == nil || e.Holder.Owner == nil || e.Holder.Owner.PID != os.Getpid() {
		t.Fatalf("want ErrTimeout naming the holder, got %v", err)
	}
	// TryAcquire behind a busy gate: busy, naming the directory's holder.
	if e := mustBusy(t, New(fastConfig()), path); e.Holder == nil || e.Holder.Owner == nil || e.Holder.Owner.PID != os.Getpid() {
		t.Fatalf("busy behind the gate does not name the holder: %v", e)
	}
}

// A gate that cannot be used (here something of the wrong kind sits at
// its queue's path) is skipped: acquisitions run ungated, waiting and
// handing over as before.
func TestUnusableGateGoesUngated(t *testing.T) {
	path := lockIn(t)
	blocker := blockGate(t, path)
	p := New(fastConfig())
	var sink logSink
	h, err := p.TryAcquire(loggedRequest(path, &sink))
	if err != nil {
		t.Fatalf("TryAcquire with an unusable gate: %v", err)
	}
	if !strings.Contains(sink.String(), "gate unusable") {
		t.Fatalf("the gate was not found unusable:\n%s", sink.String())
	}
	mustBusy(t, New(fastConfig()), path)
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		h2, err := New(fastConfig()).Acquire(ctx, request(path))
		if err == nil {
			err = h2.Release()
		}
		got <- err
	}()
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("ungated waiter: %v", err)
	}
	if fi, err := os.Lstat(gateQueue(path)); err != nil || !os.SameFile(fi, blocker) {
		t.Fatalf("the thing at the gate's path was touched: %v", err)
	}
}

// Ungated (HOLD_DIR_GATE=0) acquisitions neither make nor use a gate.
func TestUngatedConfig(t *testing.T) {
	path := lockIn(t)
	p := New(Config{Ungated: true})
	h, err := p.TryAcquire(request(path))
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	if made := gateFiles(t, path); len(made) != 0 {
		t.Fatalf("an ungated acquisition made a gate: %v", made)
	}
	for v, off := range map[string]bool{"": false, "1": false, "on": false, "0": true, "off": true, " False ": true, "no": true} {
		lookup := func(k string) string {
			if k == EnvGate {
				return v
			}
			return ""
		}
		if got := (Config{}).Resolve(lookup).Ungated; got != off {
			t.Errorf("%s=%q: Ungated %v, want %v", EnvGate, v, got, off)
		}
	}
}
