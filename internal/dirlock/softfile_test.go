//go:build unix

package dirlock

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/lock"
)

// The file form (softfile.go): hold holds the lock as filelock's
// SoftFileLock does, a plain file naming the process that made it, so that
// the real filelock waits for hold's holder and hold for filelock's.

// softRequest is request(path) asking for the file form.
func softRequest(path string) *lock.Request {
	r := request(path)
	r.SoftFile = true
	return r
}

// noRetry makes the filelock workers of this test fail on
// IsADirectoryError instead of retrying it: filelock must wait by itself.
func noRetry(t *testing.T) { t.Setenv("FILELOCK_WORKER_NO_RETRY", "1") }

// The record is filelock's for this process, byte for byte (the tests'
// filelockRecord is written from filelock's code independently), and
// parses back as a holder naming this process.
func TestSoftFileRecord(t *testing.T) {
	rec, ok := filelockSoftRecord()
	if !ok {
		t.Fatal("no record for this host")
	}
	got := string(rec)
	if want := filelockRecord(os.Getpid()); got != want {
		t.Fatalf("record %q, filelock writes %q", got, want)
	}
	r := parseFilelockSoft([]byte(got))
	if r.kind != softHolder || r.pid != os.Getpid() {
		t.Fatalf("parsed back as %+v", r)
	}
	for _, c := range []struct {
		host string
		ns   uint64
		want string
	}{
		{"build-7", 0, "build-7"},
		{"my box?", 0, "my?20box?3f"},
		{"", 0, "?"},
		{"h", initialPIDNS, "h"},
		{strings.Repeat("a", 253), 0, strings.Repeat("a", 253)},
		{strings.Repeat("a", 254), 0, ""},
		{strings.Repeat(" ", 85), 0, ""}, // 255 spelled
	} {
		got, ok := filelockHost(c.host, c.ns)
		if ok != (c.want != "") || got != c.want {
			t.Errorf("filelockHost(%q) = %q, want %q", c.host, got, c.want)
		}
	}
}

// A file-form lock is a plain file holding the record, with no token, and
// what hold says of it is true: busy naming this process, alive; Inspect
// held by it.
func TestSoftFileHeldAndReported(t *testing.T) {
	p := New(fastConfig())
	path := filepath.Join(t.TempDir(), "x.lock")
	h, err := p.TryAcquire(softRequest(path))
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("lock path: %v, %v", fi, err)
	}
	if b, _ := os.ReadFile(path); string(b) != filelockRecord(os.Getpid()) {
		t.Fatalf("lock file holds %q", b)
	}
	if h.Fence() != 0 {
		t.Fatalf("Fence %d", h.Fence())
	}
	if err := h.(lock.TokenReasoner).TokenError(); !errors.Is(err, lock.ErrNoToken) || !strings.Contains(err.Error(), "file form") {
		t.Fatalf("TokenError: %v", err)
	}
	// Other requests of this very process wait for it, in either form.
	for _, req := range []*lock.Request{request(path), softRequest(path)} {
		_, err := p.TryAcquire(req)
		var e *lock.Error
		if !errors.As(err, &e) || !errors.Is(err, lock.ErrBusy) || e.Holder == nil || e.Holder.Owner == nil ||
			e.Holder.Owner.PID != os.Getpid() || e.Holder.Alive != lock.Alive {
			t.Fatalf("TryAcquire of a held file-form lock: %v (%+v)", err, e)
		}
	}
	// Many heartbeats later it is still held and still ours.
	time.Sleep(400 * time.Millisecond)
	if err := h.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	st, err := p.Inspect(path)
	if err != nil || st.State != lock.HeldExclusive || st.Holder == nil || st.Holder.Owner.PID != os.Getpid() {
		t.Fatalf("Inspect: %+v, %v", st, err)
	}
	if !st.Holder.Owner.StartedAt.Equal(fi.ModTime()) {
		t.Fatalf("Inspect says taken at %v, the file was made at %v", st.Holder.Owner.StartedAt, fi.ModTime())
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("release left %v", err)
	}
}

// A file-form lock asks for one holder: no semaphore slots.
func TestSoftFileNoSlots(t *testing.T) {
	p := New(fastConfig())
	req := softRequest(filepath.Join(t.TempDir(), "x.lock"))
	req.Slots = 3
	if _, err := p.TryAcquireSlot(req); !errors.Is(err, lock.ErrInvalidOption) {
		t.Fatalf("TryAcquireSlot: %v", err)
	}
}

// The file removed, or replaced (even by a file holding the same record,
// as another holder of this process writes), is a loss: Lost fires,
// Check and Release report ErrLost, and Release leaves the replacement.
func TestSoftFileLost(t *testing.T) {
	for _, how := range []string{"removed", "replaced"} {
		t.Run(how, func(t *testing.T) {
			p := New(fastConfig())
			path := filepath.Join(t.TempDir(), "x.lock")
			h, err := p.TryAcquire(softRequest(path))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			if how == "replaced" {
				writeSoft(t, path, filelockRecord(os.Getpid()))
			}
			select {
			case <-h.Lost():
			case <-time.After(5 * time.Second):
				t.Fatal("no loss reported")
			}
			if err := h.Check(); !errors.Is(err, lock.ErrLost) {
				t.Fatalf("Check: %v", err)
			} else if !strings.Contains(err.Error(), "the lock file was removed") || strings.Contains(err.Error(), "directory") {
				// Issue 59: it said "the lock directory was removed".
				t.Errorf("Check of a lost file-form lock calls it a directory: %v", err)
			}
			if err := h.Release(); !errors.Is(err, lock.ErrLost) {
				t.Fatalf("Release: %v", err)
			}
			_, err = os.Lstat(path)
			if how == "replaced" && err != nil {
				t.Fatalf("Release removed the replacement: %v", err)
			}
		})
	}
}

// Release removes only its own file: replaced between its check and its
// move (the fault point), the replacement is put back, untouched.
func TestSoftFileReleaseKeepsReplacement(t *testing.T) {
	p := New(fastConfig())
	path := filepath.Join(t.TempDir(), "x.lock")
	h, err := p.TryAcquire(softRequest(path))
	if err != nil {
		t.Fatal(err)
	}
	p.fault = func(point string) {
		if point == faultReleaseVerified {
			os.Remove(path)
			writeSoft(t, path, filelockRecord(os.Getpid()))
		}
	}
	if err := h.Release(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Release: %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != filelockRecord(os.Getpid()) {
		t.Fatalf("the replacement: %q, %v", b, err)
	}
}

// A released record's token is handed on: the file form holds none, and
// leaves the one it found for the next holder to continue.
func TestSoftFileCarriesToken(t *testing.T) {
	p := New(fastConfig())
	path := filepath.Join(t.TempDir(), "x.lock")
	if err := os.WriteFile(path, lock.AppendPastRecord(nil, 7, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := p.TryAcquire(softRequest(path))
	if err != nil {
		t.Fatal(err)
	}
	if h.Fence() != 0 {
		t.Fatalf("Fence %d", h.Fence())
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if fence, ok := releasedRecord(path); !ok || fence != 7 {
		t.Fatalf("past record after release: %d, %v", fence, ok)
	}
}

// Real: filelock's SoftFileLock waits for hold's file-form holder (no
// IsADirectoryError) and gets the lock once hold lets go; then hold waits
// for filelock's, and gets it after.
func TestSoftFileRealWaitsBothWays(t *testing.T) {
	fl := filelockWorker(t)
	noRetry(t)
	p := New(fastConfig())
	path := filepath.Join(t.TempDir(), "x.lock")
	h, err := p.TryAcquire(softRequest(path))
	if err != nil {
		t.Fatal(err)
	}
	holder := fl("hold", path)
	select {
	case l := <-holder.lines:
		t.Fatalf("filelock said %q while hold held the lock", l)
	case <-holder.done:
		t.Fatalf("filelock ended while hold held the lock: %v\n%s", holder.err, holder.stderr)
	case <-time.After(time.Second):
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	holder.expect(t, "held")
	waitsForHolder(t, p, softRequest(path), holder)
}

// Real: a killed holder of either is taken over by the other at once.
func TestSoftFileRealKilledTakenOver(t *testing.T) {
	fl := filelockWorker(t)
	noRetry(t)
	t.Run("hold killed", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x")
		holder := startWorker(t, "hold", envTarget+"="+path, envSoft+"=1")
		holder.expect(t, "held")
		if fi, err := os.Lstat(path + ".lock"); err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("the worker's lock: %v, %v", fi, err)
		}
		holder.cmd.Process.Kill()
		holder.wait(t)
		w := fl("hold", path+".lock")
		w.expect(t, "held")
		w.stdin.Close()
		w.expect(t, "released")
	})
	t.Run("filelock killed", func(t *testing.T) { killedFilelockTakenOver(t, fl, softRequest) })
}

// Real: filelock workers and hold's file-form workers increment one
// counter together: the exact count, no value twice, never two holders.
func TestSoftFileRealCounter(t *testing.T) {
	fl := filelockWorker(t)
	noRetry(t)
	const iters = 25
	target := filepath.Join(t.TempDir(), "counter")
	var ws []*worker
	for range 2 {
		ws = append(ws, fl("count", target, strconv.Itoa(iters)))
		ws = append(ws, startWorker(t, "count", envTarget+"="+target, envIters+"="+strconv.Itoa(iters), envSoft+"=1"))
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
