//go:build unix

package dirlock

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/lock"
)

// Interop with npm's proper-lockfile 4.1.2, the real package, installed by
// CI with
//
//	npm ci --prefix internal/dirlock/testdata/node
//
// (package.json and package-lock.json there pin it). The tests skip only
// when node or the package is absent.

// nodeStaleMs is the Node workers' stale setting: proper-lockfile's
// minimum (it clamps anything lower up to 2 s), so the tests that wait for
// staleness wait as little as the package allows.
const nodeStaleMs = 2000

// interopConfig is the Go side's timing, matched to the Node side: the
// same stale window, and a heartbeat well inside it.
func interopConfig() Config {
	return Config{Stale: nodeStaleMs * time.Millisecond, Grace: time.Second, Heartbeat: 200 * time.Millisecond, MaxPoll: 20 * time.Millisecond}
}

var interopEnv = []string{EnvStale + "=2000", EnvGrace + "=1000", EnvHeartbeat + "=200", EnvMaxPoll + "=20"}

// nodeWorker returns a starter for worker.js, or skips the test.
func nodeWorker(t *testing.T) func(args ...string) *worker {
	t.Helper()
	node := testenv.LookPath(t, "node", "not installed; CI installs it (apt package nodejs)")
	dir, err := filepath.Abs(filepath.Join("testdata", "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "proper-lockfile", "package.json")); err != nil {
		testenv.MissingTool(t, "proper-lockfile", "not installed: npm ci --prefix internal/dirlock/testdata/node")
	}
	return func(args ...string) *worker {
		cmd := exec.Command(node, append([]string{filepath.Join(dir, "worker.js")}, args...)...)
		return startCmd(t, cmd)
	}
}

// Node and Go workers increment one counter together: the exact count, no
// value written twice, no two holders at once.
func TestInteropCounter(t *testing.T) {
	node := nodeWorker(t)
	const iters = 25
	target := filepath.Join(t.TempDir(), "counter")
	var ws []*worker
	for range 2 {
		ws = append(ws, node("count", target, strconv.Itoa(iters), strconv.Itoa(nodeStaleMs)))
		ws = append(ws, startWorker(t, "count", append([]string{envTarget + "=" + target, envIters + "=" + strconv.Itoa(iters)}, interopEnv...)...))
	}
	for _, w := range ws {
		if err := w.wait(t); err != nil {
			t.Fatalf("%v: %v\n%s", w.cmd.Args, err, w.stderr)
		}
	}
	if n := checkCount(t, target); n != 4*iters {
		t.Fatalf("count %d, want %d", n, 4*iters)
	}
}

// A Node waiter waits for hold's lock, for longer than its own stale
// window: hold's heartbeat keeps the directory's mtime fresh, so
// proper-lockfile never judges it stale.
func TestInteropNodeWaitsForHold(t *testing.T) {
	node := nodeWorker(t)
	target := filepath.Join(t.TempDir(), "counter")
	h, err := New(interopConfig()).TryAcquire(request(target + ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	try := node("try", target, strconv.Itoa(nodeStaleMs))
	try.expect(t, "busy")
	waiter := node("count", target, "1", strconv.Itoa(nodeStaleMs))
	time.Sleep(nodeStaleMs*time.Millisecond + 700*time.Millisecond)
	select {
	case <-waiter.done:
		t.Fatalf("the Node waiter finished while hold held the lock: %v\n%s", waiter.err, waiter.stderr)
	default:
	}
	if n := readCounter(target); n != 0 {
		t.Fatalf("counter %d written while hold held the lock", n)
	}
	if err := h.Check(); err != nil {
		t.Fatalf("hold's lock after the Node waiter's stale window: %v", err)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := waiter.wait(t); err != nil {
		t.Fatalf("node waiter: %v\n%s", err, waiter.stderr)
	}
	if n := checkCount(t, target); n != 1 {
		t.Fatalf("count %d, want 1", n)
	}
}

// hold waits for a Node holder's lock (no owner record: judged by the
// mtime proper-lockfile refreshes), past the stale window, and gets it
// when Node releases.
func TestInteropHoldWaitsForNode(t *testing.T) {
	node := nodeWorker(t)
	target := filepath.Join(t.TempDir(), "counter")
	holder := node("hold", target, strconv.Itoa(nodeStaleMs))
	holder.expect(t, "held")
	p := New(interopConfig())
	mustBusy(t, p, target+".lock")
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		h, err := p.Acquire(ctx, request(target+".lock"))
		if err == nil {
			err = h.Release()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("hold took a live Node lock (err %v)", err)
	case <-time.After(nodeStaleMs*time.Millisecond + 700*time.Millisecond):
	}
	holder.stdin.Close()
	holder.expect(t, "released")
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// A SIGKILLed Node holder leaves a directory with no owner record and a
// heartbeat that stops: hold takes it over once it is older than Stale,
// and not before.
func TestInteropNodeHolderKilled(t *testing.T) {
	node := nodeWorker(t)
	target := filepath.Join(t.TempDir(), "counter")
	holder := node("hold", target, strconv.Itoa(nodeStaleMs))
	holder.expect(t, "held")
	holder.cmd.Process.Kill()
	holder.wait(t)
	killed := time.Now()
	p := New(interopConfig())
	mustBusy(t, p, target+".lock")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := p.Acquire(ctx, request(target+".lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	// The lower bound is safe under load: load only makes it later.
	if waited := time.Since(killed); waited < time.Second {
		t.Fatalf("took over a Node lock %v after its holder died, before its stale time", waited)
	}
}

// A SIGKILLed hold holder is taken over as soon as its pid is seen dead,
// by hold; a Node waiter, which cannot read the owner record, still sees a
// fresh lock.
func TestInteropHoldHolderKilled(t *testing.T) {
	node := nodeWorker(t)
	target := filepath.Join(t.TempDir(), "counter")
	holder := startWorker(t, "hold", append([]string{envTarget + "=" + target}, interopEnv...)...)
	holder.expect(t, "held")
	holder.cmd.Process.Kill()
	if err := holder.wait(t); !killedBySignal(err) {
		t.Fatalf("holder: %v", err)
	}
	// Node judges the dead holder's lock by its age alone. Its stale
	// setting here is long, so that a slow start of node on a loaded
	// machine cannot make the lock look stale to it: the point is that
	// Node must wait while hold, which checks the pid, need not.
	try := node("try", target, strconv.Itoa(60_000))
	try.expect(t, "busy")
	h, err := New(interopConfig()).TryAcquire(request(target + ".lock"))
	if err != nil {
		t.Fatalf("a dead hold holder's lock was not taken over at once: %v", err)
	}
	if errors.Is(h.Check(), lock.ErrLost) {
		t.Fatal("lost")
	}
	h.Release()
}
