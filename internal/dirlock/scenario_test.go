//go:build unix

package dirlock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/lock"
)

// lockIn returns a lock path in a fresh directory.
func lockIn(t *testing.T) string {
	return filepath.Join(t.TempDir(), "data.md.lock")
}

// backdate sets path's mtime d in the past (a lock whose heartbeat stopped).
func backdate(t *testing.T, path string, d time.Duration) {
	t.Helper()
	old := time.Now().Add(-d)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

// stamp makes a lock directory at path carrying owner o.
func stamp(t *testing.T, path string, o lock.Owner) {
	t.Helper()
	if err := os.Mkdir(path, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(path, OwnerFile), o.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	return testenv.DeadPID(t)
}

func mustBusy(t *testing.T, p *Protocol, path string) *lock.Error {
	t.Helper()
	h, err := p.TryAcquire(request(path))
	if err == nil {
		h.Release()
		t.Fatal("TryAcquire took a lock that must not be taken")
	}
	var e *lock.Error
	if !errors.As(err, &e) || !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("want an *Error matching ErrBusy, got %v", err)
	}
	return e
}

func mustTake(t *testing.T, p *Protocol, path string) lock.Handle {
	t.Helper()
	h, err := p.TryAcquire(request(path))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	t.Cleanup(func() { h.Release() })
	return h
}

func TestAcquireReleaseOnDisk(t *testing.T) {
	path := lockIn(t)
	p := New(fastConfig())
	req := request(path)
	h, err := p.Acquire(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(path, OwnerFile))
	if err != nil {
		t.Fatal(err)
	}
	// The names career-ops' dir-lock reads.
	for _, key := range []string{`"pid":`, `"token":`, `"started_at":`, `"host":`, `"command":`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("owner.json lacks %s: %s", key, b)
		}
	}
	o, ok := lock.DecodeOwner(b)
	if !ok || o.ID != req.Owner.ID || o.PID != os.Getpid() || o.Protocol != "dir" {
		t.Fatalf("owner record %s does not name this acquisition", b)
	}
	if err := h.Check(); err != nil {
		t.Fatalf("Check on a held lock: %v", err)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Fatalf("lock directory still there after release: %v", err)
	}
	if err := h.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if err := h.Check(); !errors.Is(err, lock.ErrReleased) {
		t.Fatalf("Check after release: %v", err)
	}
	// Only the waiting gate (and its queue) stays: like a kernel lock file,
	// it is never deleted.
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "*"))
	for _, f := range left {
		if !strings.HasPrefix(f, path+GateSuffix) {
			t.Fatalf("release left %v behind, want only the gate", left)
		}
	}
}

func TestHeartbeatRefreshesMtime(t *testing.T) {
	path := lockIn(t)
	p := New(fastConfig())
	mustTake(t, p, path)
	backdate(t, path, time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if time.Since(fi.ModTime()) < time.Minute {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the heartbeat never refreshed the lock directory's mtime")
}

func TestMissingParentFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "x.lock")
	_, err := New(Config{}).Acquire(context.Background(), request(path))
	if err == nil || errors.Is(err, lock.ErrBusy) || errors.Is(err, lock.ErrTimeout) {
		t.Fatalf("want an immediate error for a missing parent, got %v", err)
	}
}

// Seed scenario: a directory created a moment ago with no owner record (a
// lock between its mkdir and its stamp) is not stolen even with an
// aggressive stale setting: the grace floor protects it.
func TestFreshOwnerlessNotStolen(t *testing.T) {
	path := lockIn(t)
	if err := os.Mkdir(path, 0o777); err != nil {
		t.Fatal(err)
	}
	p := New(Config{Stale: time.Nanosecond, Grace: 5 * time.Second})
	e := mustBusy(t, p, path)
	if !strings.Contains(e.Error(), "no owner record") {
		t.Errorf("busy error does not explain the ownerless lock: %v", e)
	}
}

// Seed scenario: an old ownerless lock (a proper-lockfile holder that died,
// or a crash before the stamp) is reclaimed.
func TestOldOwnerlessReclaimed(t *testing.T) {
	path := lockIn(t)
	os.Mkdir(path, 0o777)
	backdate(t, path, 10*time.Second)
	mustTake(t, New(Config{Stale: time.Second, Grace: time.Second}), path)
}

// Seed scenario: a live reclaim guard is not evicted, however aggressive
// the stale setting; an old one is cleared and the stale lock reclaimed.
func TestGuard(t *testing.T) {
	path := lockIn(t)
	stamp(t, path, lock.Owner{PID: deadPID(t), ID: "dead", StartedAt: time.Now()})
	guard := path + GuardSuffix
	os.Mkdir(guard, 0o777)
	p := New(Config{Stale: time.Nanosecond, Grace: 2 * time.Second})
	mustBusy(t, p, path)
	if _, err := os.Stat(guard); err != nil {
		t.Fatalf("a live guard was evicted: %v", err)
	}
	backdate(t, guard, 5*time.Second)
	mustTake(t, p, path)
	if _, err := os.Stat(guard); !os.IsNotExist(err) {
		t.Fatalf("old guard still there: %v", err)
	}
}

// A dead owner on this host is stale at once, however fresh its heartbeat.
func TestDeadOwnerStaleAtOnce(t *testing.T) {
	path := lockIn(t)
	stamp(t, path, lock.Owner{PID: deadPID(t), Host: proc.Hostname(), ID: "x", StartedAt: time.Now()})
	mustTake(t, New(Config{Stale: time.Hour}), path)
}

// A live pid whose start time differs from the record's is a reused pid:
// the original holder is gone.
func TestReusedPidStale(t *testing.T) {
	if _, ok := proc.StartTime(os.Getppid()); !ok {
		t.Skip("no process start times on this OS")
	}
	path := lockIn(t)
	stamp(t, path, lock.Owner{PID: os.Getppid(), ProcStart: 1, ID: "x", StartedAt: time.Now()})
	mustTake(t, New(Config{Stale: time.Hour}), path)
}

// A live owner is never stale, however old its heartbeat.
func TestLiveOwnerNeverStale(t *testing.T) {
	path := lockIn(t)
	pp := os.Getppid()
	start, _ := proc.StartTime(pp)
	stamp(t, path, lock.Owner{PID: pp, ProcStart: start, Host: proc.Hostname(), ID: "x", StartedAt: time.Now()})
	backdate(t, path, 24*time.Hour)
	mustBusy(t, New(Config{Stale: time.Second, Grace: time.Second}), path)
}

// Seed scenario: our own pid with no handle of ours is judged by age; with
// a handle of ours it is live even when its heartbeat looks late.
func TestOwnPidWithoutHandleJudgedByAge(t *testing.T) {
	path := lockIn(t)
	self := proc.Self()
	self.ID = "a token no handle of this protocol holds"
	self.StartedAt = time.Now()
	stamp(t, path, self)
	p := New(Config{Stale: time.Second, Grace: time.Second})
	mustBusy(t, p, path)
	backdate(t, path, 5*time.Second)
	h := mustTake(t, p, path)
	h.Release()

	// Held by a handle of p: never reclaimed by p, even with a late beat.
	p2 := New(Config{Stale: time.Second, Grace: time.Second, Heartbeat: time.Hour})
	mustTake(t, p2, path)
	backdate(t, path, 5*time.Second)
	mustBusy(t, p2, path)
}

// An owner on another host is judged by heartbeat age.
func TestOtherHostJudgedByAge(t *testing.T) {
	path := lockIn(t)
	stamp(t, path, lock.Owner{PID: 1, Host: "elsewhere.invalid", ID: "x", StartedAt: time.Now()})
	p := New(Config{Stale: 2 * time.Second, Grace: time.Second})
	mustBusy(t, p, path)
	backdate(t, path, 3*time.Second)
	mustTake(t, p, path)
}

// An owner record that exists but cannot be read is not a missing one: it
// pins the lock live, however old.
func TestUnreadableOwnerWaits(t *testing.T) {
	path := lockIn(t)
	os.Mkdir(path, 0o777)
	// A symlink as owner.json cannot be opened without following it; as
	// root, permission bits would not make it unreadable.
	if err := os.Symlink("/etc/hostname", filepath.Join(path, OwnerFile)); err != nil {
		t.Fatal(err)
	}
	backdate(t, path, time.Hour)
	e := mustBusy(t, New(Config{Stale: time.Second, Grace: time.Second}), path)
	if !strings.Contains(e.Hint, "cannot be read") {
		t.Errorf("busy error does not say the record is unreadable: %v", e)
	}
}

// A corrupt record does not prove a lock: the directory is refused at
// once, however old, and nothing is deleted.
func TestCorruptOwnerIsNotALock(t *testing.T) {
	path := lockIn(t)
	os.Mkdir(path, 0o777)
	corrupt := []byte(`{"pid": 12, "tok`)
	os.WriteFile(filepath.Join(path, OwnerFile), corrupt, 0o644)
	backdate(t, path, time.Hour)
	p := New(Config{Stale: time.Second, Grace: time.Second})
	mustForeign(t, p, path, "not a lock record")
	if b, err := os.ReadFile(filepath.Join(path, OwnerFile)); err != nil || string(b) != string(corrupt) {
		t.Fatalf("owner.json after the refusal: %q, %v", b, err)
	}
}

// An empty plain file, or one holding a lock record, at the lock path is
// a leftover, reclaimed by age.
func TestPlainFileLeftover(t *testing.T) {
	for _, content := range []string{"", `{"pid":4242,"token":"t","started_at":"2026-11-30T12:00:00Z"}`} {
		path := lockIn(t)
		os.WriteFile(path, []byte(content), 0o644)
		p := New(Config{Stale: time.Second, Grace: time.Second})
		e := mustBusy(t, p, path)
		if !strings.Contains(e.Hint, "leftover file") {
			t.Errorf("busy error does not name the leftover: %v", e)
		}
		backdate(t, path, 5*time.Second)
		mustTake(t, p, path)
		fi, err := os.Lstat(path)
		if err != nil || !fi.IsDir() {
			t.Fatalf("lock path after reclaim: %v %v", fi, err)
		}
	}
}

// Two reclaimers racing on a dead holder's lock: exactly one wins. In
// process, with separate Protocol values (so neither knows the other's
// token) and goroutines released together.
func TestReclaimRaceInProcess(t *testing.T) {
	dead := deadPID(t)
	dir := t.TempDir()
	for rep := 0; rep < 200; rep++ {
		path := filepath.Join(dir, "r"+time.Now().Format("150405.000000000")+".lock")
		stamp(t, path, lock.Owner{PID: dead, ID: "dead", StartedAt: time.Now()})
		start := make(chan struct{})
		var wg sync.WaitGroup
		results := make([]lock.Handle, 2)
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := New(fastConfig())
				<-start
				results[i], errs[i] = p.TryAcquire(request(path))
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for i := range 2 {
			if errs[i] == nil {
				won++
			} else if !errors.Is(errs[i], lock.ErrBusy) {
				t.Fatalf("rep %d: unexpected error %v", rep, errs[i])
			}
		}
		if won != 1 {
			t.Fatalf("rep %d: %d reclaimers won (errors %v)", rep, won, errs)
		}
		for _, h := range results {
			if h != nil {
				if err := h.Release(); err != nil {
					t.Fatalf("rep %d: release: %v", rep, err)
				}
			}
		}
	}
}

// Seed scenario: a lock that changes hands every 40 ms does not time out a
// waiter whose patience is 150 ms (each window saw progress), but the
// ceiling still ends the wait; a lock that stays with one holder ends it
// after the patience window. Both errors say which bound expired and name
// the holder.
func TestPatienceAndCeiling(t *testing.T) {
	path := lockIn(t)
	waited, err := patienceRule(t, path, func() *lock.Request { return request(path) })
	t.Logf("ceiling after %v; %v", waited.Round(time.Millisecond), err)
}

// patienceRule runs the seed's scenario on path: the lock is stamped with a
// live holder (this test's parent, command "churn") and handed round
// without ever being freed, the owner record replaced atomically with a
// new token every 40 ms. A waiter with 150 ms patience must then be ended
// by the 1.5 s ceiling, not by its patience, with an error naming the
// holder; once the lock stays with one holder, patience must end the wait.
// req makes each waiter's request. It returns how long the first wait
// took and the second wait's error.
func patienceRule(t *testing.T, path string, req func() *lock.Request) (waited time.Duration, last error) {
	t.Helper()
	pp := os.Getppid()
	start, _ := proc.StartTime(pp)
	holder := lock.Owner{PID: pp, ProcStart: start, Host: proc.Hostname(), ID: "h0", StartedAt: time.Now(), Command: []string{"churn"}}
	stamp(t, path, holder)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(40 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			o := holder
			o.ID = "h" + time.Now().Format("150405.000000")
			tmp := filepath.Join(path, "tmp")
			os.WriteFile(tmp, o.Encode(), 0o644)
			os.Rename(tmp, filepath.Join(path, OwnerFile))
		}
	}()
	p := New(Config{Patience: 150 * time.Millisecond, Ceiling: 1500 * time.Millisecond, MaxPoll: 20 * time.Millisecond})
	t0 := time.Now()
	_, err := p.Acquire(context.Background(), req())
	waited = time.Since(t0)
	close(stop)
	wg.Wait()
	if err == nil || !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want a timeout, got %v", err)
	}
	if !strings.Contains(err.Error(), "ceiling") {
		t.Fatalf("a lock changing hands every 40ms timed out a waiter with 150ms patience after %v: %v", waited, err)
	}
	if !strings.Contains(err.Error(), "churn") || !strings.Contains(err.Error(), "alive") {
		t.Errorf("timeout does not name the holder: %v", err)
	}

	// Now the lock stays with one holder: patience ends the wait.
	_, err = p.Acquire(context.Background(), req())
	if err == nil || !errors.Is(err, lock.ErrTimeout) || !strings.Contains(err.Error(), "patience") {
		t.Fatalf("want a patience timeout on a wedged holder, got %v", err)
	}
	return waited, err
}

// The caller's context is the hard bound, and its error names the holder.
func TestContextEndsWait(t *testing.T) {
	path := lockIn(t)
	p := New(fastConfig())
	mustTake(t, p, path)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := New(fastConfig()).Acquire(ctx, request(path))
	if !errors.Is(err, lock.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want ErrTimeout, got %v", err)
	}
	var e *lock.Error
	if !errors.As(err, &e) || e.Holder == nil || e.Holder.Owner == nil || e.Holder.Owner.PID != os.Getpid() {
		t.Fatalf("timeout does not name the holder: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := p.Acquire(ctx, request(path)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
}

// A waiter wakes when the holder releases (directory events or polling).
func TestWaiterWakesOnRelease(t *testing.T) {
	path := lockIn(t)
	p := New(fastConfig())
	h, err := p.TryAcquire(request(path))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		h2, err := p.Acquire(ctx, request(path))
		if err == nil {
			err = h2.Release()
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// Lost lock: the lock directory deleted under its holder fires Lost (by
// the heartbeat), and Check and Release report ErrLost.
func TestLostWhenDeleted(t *testing.T) {
	path := lockIn(t)
	h := mustTake(t, New(Config{Heartbeat: 50 * time.Millisecond, Stale: time.Second}), path)
	hd := h.(*handle)
	hd.mu.Lock()
	before := hd.beats
	os.RemoveAll(path)
	hd.mu.Unlock()
	t0 := time.Now()
	select {
	case <-h.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("Lost never fired after the lock directory was deleted")
	}
	hd.mu.Lock()
	after := hd.beats
	hd.mu.Unlock()
	// Counted in beats, not in time (the machine may be loaded): the first
	// beat after the deletion must notice it.
	if after-before > 2 {
		t.Fatalf("lost noticed after %d heartbeats", after-before)
	}
	t.Logf("lost noticed by beat %d after the deletion, %v later (heartbeat 50ms)", after-before, time.Since(t0).Round(time.Millisecond))
	if err := h.Check(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Check: %v", err)
	}
	for range 2 {
		if err := h.Release(); !errors.Is(err, lock.ErrLost) {
			t.Fatalf("Release: %v", err)
		}
	}
}

// Lost lock: replaced under its holder by a successor's lock. Check sees
// it at once (without waiting for a beat), Lost fires, Release reports
// ErrLost and leaves the successor's lock alone.
func TestLostWhenReplaced(t *testing.T) {
	path := lockIn(t)
	h := mustTake(t, New(Config{Heartbeat: 50 * time.Millisecond, Stale: time.Second}), path)
	os.RemoveAll(path)
	// The successor comes from elsewhere (another host, a Node tool): here
	// the holder keeps its place at this machine's gate until its next beat.
	elsewhere := fastConfig()
	elsewhere.Ungated = true
	succ := mustTake(t, New(elsewhere), path)
	if err := h.Check(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Check right after the replacement: %v", err)
	}
	select {
	case <-h.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("Lost never fired")
	}
	if err := h.Release(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Release: %v", err)
	}
	if err := succ.Check(); err != nil {
		t.Fatalf("the successor's lock was harmed: %v", err)
	}
}

// Lost lock: the owner record swapped inside our directory (same inode).
func TestLostWhenRecordReplaced(t *testing.T) {
	path := lockIn(t)
	h := mustTake(t, New(Config{Heartbeat: 50 * time.Millisecond, Stale: time.Second}), path)
	o := *h.Owner()
	o.ID = "someone else"
	os.WriteFile(filepath.Join(path, OwnerFile), o.Encode(), 0o644)
	select {
	case <-h.Lost():
	case <-time.After(30 * time.Second):
		t.Fatal("Lost never fired")
	}
	if err := h.Release(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Release: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("Release removed a lock carrying another token: %v", err)
	}
}

func TestInspectAndBreak(t *testing.T) {
	path := lockIn(t)
	p := New(fastConfig())
	st, err := p.Inspect(path)
	if err != nil || st.State != lock.Free || st.Protocol != "dir" {
		t.Fatalf("free lock: %+v %v", st, err)
	}
	h := mustTake(t, p, path)
	st, _ = p.Inspect(path)
	if st.State != lock.HeldExclusive || st.Holder.Owner.ID != h.Owner().ID || st.Holder.Alive != lock.Alive {
		t.Fatalf("held lock: %+v", st)
	}
	// A live holder is refused, named.
	_, err = p.Break(path, false)
	if !errors.Is(err, lock.ErrBusy) || !strings.Contains(err.Error(), "pid ") {
		t.Fatalf("Break of a live lock: %v", err)
	}
	// --force removes it; its holder finds the lock lost.
	if _, err := p.Break(path, true); err != nil {
		t.Fatal(err)
	}
	if err := h.Check(); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("holder after forced break: %v", err)
	}

	// A dead holder's lock: stale, and Break removes it.
	path2 := lockIn(t)
	stamp(t, path2, lock.Owner{PID: deadPID(t), ID: "d", StartedAt: time.Now()})
	st, _ = p.Inspect(path2)
	if st.State != lock.Stale || st.Holder.Alive != lock.Dead {
		t.Fatalf("dead holder's lock: %+v", st)
	}
	if _, err := p.Break(path2, false); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path2); !os.IsNotExist(err) {
		t.Fatalf("Break left the stale lock: %v", err)
	}
}

// Where the OS reports directory events, a waiter wakes when the lock is
// removed, not when its backoff ends: here the backoff is an hour. Both
// kinds of sleep are shown: on the Protocol's shared watch (a context that
// can end) and, on Linux, in blocking calls on a watch of the waiter's own
// (a context that cannot), which also drops the events of the watches it
// had before.
func TestWaiterWakesOnEvent(t *testing.T) {
	if !eventsWork {
		t.Skip("no directory events on this OS: waiters poll")
	}
	p := New(Config{})
	for round, block := range []bool{false, true, true} {
		path := lockIn(t)
		os.Mkdir(path, 0o777)
		w := p.newWaiter(path, time.Hour, block)
		if w.removals == nil && w.blocking == nil {
			t.Fatal("no watcher on the lock's directory")
		}
		if block && runtime.GOOS == "linux" && w.blocking == nil {
			t.Fatal("no blocking watch on Linux")
		}
		w.next = time.Hour
		go func() {
			time.Sleep(50 * time.Millisecond)
			os.Rename(path, path+".rm-test")
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if !block {
			defer cancel()
		} else {
			// A context that cannot end is what selects the blocking sleep.
			cancel()
			ctx = context.Background()
		}
		if byEvent, err := w.sleep(ctx, w.backoff(time.Time{})); err != nil || !byEvent {
			t.Fatalf("round %d (block %v): waiter not woken by the lock's removal: %v", round, block, err)
		}
		// A wait with nothing happening ends by its time, not by the
		// events just seen nor by the end of this watch.
		w.close()
		if block {
			w = p.newWaiter(path, time.Hour, block)
			start := time.Now()
			if byEvent, _ := w.sleep(ctx, 30*time.Millisecond); byEvent {
				t.Fatalf("round %d: a new watch woke on an old event", round)
			}
			if waited := time.Since(start); waited < 30*time.Millisecond {
				t.Fatalf("round %d: slept %v of 30ms", round, waited)
			}
			w.close()
		}
	}
}

// A directory taken from the path between our mkdir and our stamp (a
// reclaimer moving it aside) fails the read-back; the stamp we wrote into
// it is withdrawn, so if it is ever put back it is ownerless and ages out,
// rather than naming this live process with no handle behind it.
func TestFailedReadBackWithdrawsStamp(t *testing.T) {
	path := lockIn(t)
	moved := path + ".rm-test"
	p := New(fastConfig())
	taken := false
	p.fault = func(point string) {
		if point == faultAfterMkdir && !taken {
			taken = true
			os.Rename(path, moved)
		}
	}
	mustTake(t, p, path) // the second pass wins the free path
	if !taken {
		t.Fatal("fault point not reached")
	}
	if entries, err := os.ReadDir(moved); err != nil || len(entries) != 0 {
		t.Fatalf("directory taken from us still holds %v (%v)", entries, err)
	}
}
