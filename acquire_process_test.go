package hold_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/testenv"
)

// waitersBlocked waits until pid has n waits blocked in the kernel on the
// lock file at path. Outside Linux, where that cannot be asked, it gives
// the waiters a moment instead (the tests stay correct, only weaker).
func waitersBlocked(t *testing.T, path string, pid, n int) {
	t.Helper()
	if _, _, ok := kernelLocks(path); !ok {
		time.Sleep(300 * time.Millisecond)
		return
	}
	testenv.Eventually(t, hangBound, fmt.Sprintf("%d waits of pid %d to block on %s", n, pid, path), func() bool {
		_, waiters, _ := kernelLocks(path)
		c := 0
		for _, w := range waiters {
			if w == pid {
				c++
			}
		}
		return c >= n
	})
}

// lockIdle waits until the kernel lists nobody holding or waiting for the
// lock at path. An abandoned wait that kept the lock would fail it.
func lockIdle(t *testing.T, path string) {
	t.Helper()
	if _, _, ok := kernelLocks(path); !ok {
		return
	}
	testenv.Eventually(t, hangBound, "the lock "+path+" to be idle", func() bool {
		h, w, _ := kernelLocks(path)
		return len(h) == 0 && len(w) == 0
	})
}

func readTokens(t *testing.T, path string) []uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var tokens []uint64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) == 0 {
			continue
		}
		v, err := strconv.ParseUint(fs[0], 10, 64)
		if err != nil {
			t.Fatalf("bad token line %q", sc.Text())
		}
		tokens = append(tokens, v)
	}
	return tokens
}

// TestGoroutinesExcludeEachOther: every Acquire opens its own descriptor,
// so goroutines of one process exclude each other like processes do.
func TestGoroutinesExcludeEachOther(t *testing.T) {
	const goroutines, each = 8, 100
	dir := t.TempDir()
	target, logPath := filepath.Join(dir, "counter"), filepath.Join(dir, "tokens")
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Go(func() {
			for range each {
				l, err := hold.Acquire(context.Background(), target)
				if err != nil {
					errs <- err
					return
				}
				err = incrementFile(target)
				if err == nil {
					err = appendLine(logPath, strconv.FormatUint(l.Token(), 10))
				}
				if rerr := l.Release(); err == nil {
					err = rerr
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(target)
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(goroutines*each) {
		t.Fatalf("counter = %s, want %d", got, goroutines*each)
	}
	tokens := readTokens(t, logPath)
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d after %d: not strictly increasing", tokens[i], tokens[i-1])
		}
	}
}

// TestKilledHolderFreesWaiters: a holder SIGKILLed inside its critical
// section hands the lock to waiters that were already asleep in the
// kernel, one in another process and one in this one.
func TestKilledHolderFreesWaiters(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "t")
	lockPath := target + ".lock"
	mark := filepath.Join(dir, "inside")
	holder := startCoreWorker(t, "core-hold", "CORE_TARGET="+target, "CORE_MARK="+mark) // holds until killed
	hr := holder.report(t, hangBound)

	waiter := startCoreWorker(t, "core-hold", "CORE_TARGET="+target, "CORE_RELEASE=now")
	type result struct {
		l   *hold.Lock
		err error
	}
	got := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() {
		l, err := hold.Acquire(ctx, target)
		got <- result{l, err}
	}()
	waitersBlocked(t, lockPath, waiter.cmd.Process.Pid, 1)
	waitersBlocked(t, lockPath, os.Getpid(), 1)
	if !fileExists(mark) {
		t.Fatal("the holder's marker is gone before it was killed")
	}

	if err := holder.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	holder.wait(t, hangBound)

	var r result
	select {
	case r = <-got:
	case <-time.After(hangBound):
		t.Fatal("the waiting goroutine never got the lock after its holder was killed")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	token := r.l.Token() // asked while held: tokens exist only with their record
	if err := r.l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := waiter.wait(t, hangBound); err != nil {
		t.Fatalf("waiting process: %v\n%s", err, waiter.out.String())
	}
	wr := waiter.report(t, hangBound)
	if wr.Token <= hr.Token || token <= hr.Token || wr.Token == token {
		t.Fatalf("tokens: killed holder %d, waiting process %d, waiting goroutine %d: want both above the holder's and distinct", hr.Token, wr.Token, token)
	}
}

// TestSharedHolders: shared holders run together; an exclusive waiter
// waits until every one of them has let go; shared waiters wait for an
// exclusive holder, and then run together again.
func TestSharedHolders(t *testing.T) {
	const readers = 3
	dir := t.TempDir()
	target := filepath.Join(dir, "t")
	lockPath := target + ".lock"
	overlap := filepath.Join(dir, "overlap")
	if err := os.Mkdir(overlap, 0o755); err != nil {
		t.Fatal(err)
	}

	// Phase 1: shared holders, all inside at once.
	var rs []*coreWorker
	for i := range readers {
		rs = append(rs, startCoreWorker(t, "core-hold", "CORE_TARGET="+target, "CORE_SHARED=1",
			"CORE_OVERLAP_DIR="+overlap, fmt.Sprintf("CORE_OVERLAP_N=%d", readers),
			"CORE_RELEASE="+filepath.Join(dir, fmt.Sprintf("go-%d", i))))
	}
	for _, r := range rs {
		if rep := r.report(t, hangBound); rep.Err != "" {
			t.Fatalf("shared holder: %s", rep.Err)
		}
	}
	st, err := hold.Inspect(target)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != hold.HeldShared {
		t.Fatalf("Inspect with %d shared holders: %v, want held shared", readers, st.State)
	}

	// An exclusive waiter must not get in while any shared holder is.
	type result struct {
		inside []string
		l      *hold.Lock
		err    error
	}
	got := make(chan result, 1)
	go func() {
		l, err := hold.Acquire(context.Background(), target)
		ins, _ := filepath.Glob(filepath.Join(overlap, "in-*"))
		got <- result{ins, l, err}
	}()
	waitersBlocked(t, lockPath, os.Getpid(), 1)
	for i, r := range rs {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("go-%d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := r.wait(t, hangBound); err != nil {
			t.Fatalf("shared holder %d: %v\n%s", i, err, r.out.String())
		}
		if i < len(rs)-1 {
			select {
			case res := <-got:
				t.Fatalf("exclusive waiter got the lock (err %v) while %d shared holders remain", res.err, len(rs)-1-i)
			default:
			}
		}
	}
	var res result
	select {
	case res = <-got:
	case <-time.After(hangBound):
		t.Fatal("exclusive waiter never got the lock after the shared holders left")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	if len(res.inside) != 0 {
		t.Fatalf("exclusive holder got in while shared holders were inside: %v", res.inside)
	}
	excl := res.l.Token()

	// Phase 2: with an exclusive holder, shared waiters wait; then they
	// all get in together.
	mark := filepath.Join(dir, "exclusive-inside")
	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	overlap2 := filepath.Join(dir, "overlap2")
	if err := os.Mkdir(overlap2, 0o755); err != nil {
		t.Fatal(err)
	}
	rs = nil
	for range readers {
		rs = append(rs, startCoreWorker(t, "core-hold", "CORE_TARGET="+target, "CORE_SHARED=1",
			"CORE_ABSENT="+mark, "CORE_OVERLAP_DIR="+overlap2, fmt.Sprintf("CORE_OVERLAP_N=%d", readers),
			"CORE_RELEASE=now"))
	}
	for _, r := range rs {
		waitersBlocked(t, lockPath, r.cmd.Process.Pid, 1)
	}
	os.Remove(mark)
	if err := res.l.Release(); err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if err := r.wait(t, hangBound); err != nil {
			t.Fatalf("shared waiter: %v\n%s", err, r.out.String())
		}
		if rep := r.report(t, hangBound); rep.Token != excl {
			t.Fatalf("shared holder's token = %d, want the last exclusive token %d", rep.Token, excl)
		}
	}
}

// TestBusyTimeoutCancel: TryAcquire on a held lock fails at once with
// ErrBusy naming the holder; a wait that reaches its deadline fails with
// ErrTimeout (and context.DeadlineExceeded), one that is cancelled with
// context.Canceled, both naming the holder; and once the holder lets go the
// abandoned waits have left nothing held.
func TestBusyTimeoutCancel(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "t")
	lockPath := target + ".lock"
	release := filepath.Join(dir, "release")
	holder := startCoreWorker(t, "core-hold", "CORE_TARGET="+target, "CORE_RELEASE="+release)
	hr := holder.report(t, hangBound)
	pidText := fmt.Sprintf("pid %d", hr.PID)

	checkHolder := func(what string, err error) {
		t.Helper()
		var he *hold.Error
		if !errors.As(err, &he) {
			t.Fatalf("%s: %T %v, want a *hold.Error", what, err, err)
		}
		if he.Path != lockPath {
			t.Errorf("%s: Path = %q, want %q", what, he.Path, lockPath)
		}
		if he.Holder == nil || he.Holder.Owner == nil || he.Holder.Owner.PID != hr.PID {
			t.Errorf("%s: Holder = %+v, want the owner record of pid %d", what, he.Holder, hr.PID)
		} else if he.Holder.Alive != hold.Alive {
			t.Errorf("%s: holder liveness = %v, want alive", what, he.Holder.Alive)
		}
		if !strings.Contains(err.Error(), pidText) {
			t.Errorf("%s: message %q does not name %s", what, err, pidText)
		}
	}

	_, err := hold.TryAcquire(target)
	if !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("TryAcquire on a held lock: %v, want ErrBusy", err)
	}
	checkHolder("TryAcquire", err)
	t.Logf("busy: %v", err)

	const wait = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_, err = hold.Acquire(ctx, target)
	late := time.Since(deadline)
	if !errors.Is(err, hold.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire past its deadline: %v, want ErrTimeout and context.DeadlineExceeded", err)
	}
	if errors.Is(err, context.Canceled) {
		t.Errorf("a timeout also matches context.Canceled: %v", err)
	}
	checkHolder("Acquire with deadline", err)
	t.Logf("timeout returned %v after the deadline: %v", late, err)
	if late > 5*time.Second {
		t.Fatalf("Acquire returned %v after its deadline", late)
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(wait, cancel)
	_, err = hold.Acquire(ctx, target)
	if !errors.Is(err, context.Canceled) || errors.Is(err, hold.ErrTimeout) {
		t.Fatalf("cancelled Acquire: %v, want context.Canceled and not ErrTimeout", err)
	}
	checkHolder("cancelled Acquire", err)

	// An Acquire whose context has already ended does not even try.
	_, err = hold.Acquire(ctx, target)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a dead context: %v", err)
	}

	// The two abandoned waits are still asleep in the kernel; when the
	// holder lets go each gets the lock and must give it straight back.
	waitersBlocked(t, lockPath, os.Getpid(), 2)
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := holder.wait(t, hangBound); err != nil {
		t.Fatalf("holder: %v\n%s", err, holder.out.String())
	}
	lockIdle(t, lockPath)
	var l *hold.Lock
	testenv.Eventually(t, hangBound, "the lock to be free after its holder left", func() bool {
		l, err = hold.TryAcquire(target)
		return err == nil
	})
	if l.Token() <= hr.Token {
		t.Fatalf("token %d after holder's %d", l.Token(), hr.Token)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseAndCheck: Release is idempotent; Check reports a released
// lock; the owner record describes this process.
func TestReleaseAndCheck(t *testing.T) {
	target := filepath.Join(t.TempDir(), "t")
	l, err := hold.Acquire(context.Background(), target, hold.Field("job", "nightly"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); err != nil {
		t.Fatalf("Check on a held lock: %v", err)
	}
	o := l.Owner()
	if o.PID != os.Getpid() || o.Fence != l.Token() || l.Token() == 0 || o.Fields["job"] != "nightly" || o.ID == "" || o.StartedAt.IsZero() {
		t.Fatalf("owner record %+v does not describe this holder (token %d)", o, l.Token())
	}
	if l.Path() != target+".lock" || l.Target() != target || l.Protocol() != "flock" || l.File() == nil {
		t.Fatalf("Path %q Target %q Protocol %q File %v", l.Path(), l.Target(), l.Protocol(), l.File())
	}
	st, err := hold.Inspect(target)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != hold.HeldExclusive || st.Holder == nil || st.Holder.Owner == nil || st.Holder.Owner.ID != o.ID || st.Holder.Owner.Fields["job"] != "nightly" || st.Fence != l.Token() {
		t.Fatalf("Inspect of a held lock: %+v", st)
	}
	select {
	case <-l.Lost():
		t.Fatal("a kernel lock reported lost")
	default:
	}
	for i := range 3 {
		if err := l.Release(); err != nil {
			t.Fatalf("Release #%d: %v", i+1, err)
		}
	}
	if err := l.Check(); !errors.Is(err, hold.ErrReleased) {
		t.Fatalf("Check after Release: %v, want ErrReleased", err)
	}
	st, err = hold.Inspect(target)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != hold.Free || st.Fence != l.Token() {
		t.Fatalf("Inspect after release: state %v fence %d, want free with fence %d", st.State, st.Fence, l.Token())
	}
	if _, err := os.Stat(target + ".lock"); err != nil {
		t.Fatalf("the lock file must stay after release: %v", err)
	}
	// Releasing concurrently is safe too.
	l, err = hold.Acquire(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := l.Release(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	l2, err := hold.TryAcquire(target)
	if err != nil {
		t.Fatalf("after concurrent releases: %v", err)
	}
	l2.Release()
}

// TestDo: Do returns fn's error, releases when fn panics, and does not run
// fn when it cannot get the lock.
func TestDo(t *testing.T) {
	// The wait that times out below is abandoned, not ended: its own
	// goroutine closes the lock file once it is granted the lock, after
	// the test's last release (internal/flock's waitLock).
	target := filepath.Join(testenv.TempDir(t), "t")
	ctx := context.Background()
	errFn := errors.New("fn failed")
	ran := false
	err := hold.Do(ctx, target, func(ctx context.Context) error {
		ran = true
		if _, err := hold.TryAcquire(target); !errors.Is(err, hold.ErrBusy) {
			t.Errorf("inside Do, TryAcquire: %v, want ErrBusy", err)
		}
		return errFn
	})
	if !ran || !errors.Is(err, errFn) {
		t.Fatalf("Do = %v (ran %v), want fn's error", err, ran)
	}

	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the panic to continue", r)
			}
		}()
		hold.Do(ctx, target, func(context.Context) error { panic("boom") })
	}()
	l, err := hold.TryAcquire(target)
	if err != nil {
		t.Fatalf("after a panic in Do the lock is still held: %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	ran = false
	err = hold.Do(tctx, target, func(context.Context) error { ran = true; return nil })
	if ran || !errors.Is(err, hold.ErrTimeout) {
		t.Fatalf("Do on a held lock: %v (ran %v), want ErrTimeout without running fn", err, ran)
	}
	l.Release()
	if err := hold.Do(ctx, target, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
}

// TestRemovedLockFileIsLost: someone deleting the lock file of a held lock
// lets a newcomer lock a new file at the same path; the holder's Check
// reports ErrLost and its Lost channel closes.
func TestRemovedLockFileIsLost(t *testing.T) {
	testenv.SkipUnderWine(t, "a removed file that is still open keeps its name until its last handle closes, as before Windows 10, so no newcomer can create the lock file again")
	target := filepath.Join(t.TempDir(), "t")
	l, err := hold.Acquire(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(l.Path()); err != nil {
		t.Fatal(err)
	}
	newcomer, err := hold.TryAcquire(target)
	if err != nil {
		t.Fatalf("after the lock file was removed a newcomer should get a new one: %v", err)
	}
	defer newcomer.Release()
	if err := l.Check(); !errors.Is(err, hold.ErrLost) {
		t.Fatalf("Check: %v, want ErrLost", err)
	}
	select {
	case <-l.Lost():
	case <-time.After(hangBound):
		t.Fatal("Lost did not close")
	}
	if err := l.Release(); !errors.Is(err, hold.ErrLost) {
		t.Fatalf("Release: %v, want ErrLost", err)
	}
	if err := newcomer.Check(); err != nil {
		t.Fatalf("the newcomer's lock: %v", err)
	}
}
