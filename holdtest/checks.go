package holdtest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
)

// Run checks that the protocol s describes keeps every promise of a hold
// protocol (see the package comment), each in a subtest named after it.
func Run(t *testing.T, s Subject) {
	opts, closeFn, err := s.options()
	if err != nil {
		t.Fatalf("%s: options: %v", s.Name, err)
	}
	t.Cleanup(closeFn)
	c := &checker{s: s, opts: opts}
	t.Run("Exclusion", c.exclusion)
	t.Run("TryBusy", c.tryBusy)
	t.Run("WaitEnds", c.waitEnds)
	t.Run("ReleaseIdempotent", c.releaseIdempotent)
	t.Run("Tokens", c.tokens)
	t.Run("Shared", c.shared)
	t.Run("Inspect", c.inspect)
	t.Run("Lost", c.lost)
	t.Run("Crash", c.crash)
	t.Run("Foreign", c.foreign)
	t.Run("BadNames", c.badNames)
}

type checker struct {
	s    Subject
	opts []hold.Option
}

// with returns the subject's options followed by more.
func (c *checker) with(more ...hold.Option) []hold.Option {
	return append(append([]hold.Option(nil), c.opts...), more...)
}

func (c *checker) acquire(t *testing.T, target string, more ...hold.Option) *hold.Lock {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	l, err := hold.Acquire(ctx, target, c.with(more...)...)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", target, err)
	}
	t.Cleanup(func() { l.Release() })
	return l
}

// holder starts a worker that holds the lock on target until it is waited
// for, and returns it with its report.
func (c *checker) holder(t *testing.T, target string, env ...string) (*worker, report) {
	t.Helper()
	w := c.s.start(t, "hold", append([]string{targetEnv + "=" + target}, env...)...)
	r := w.report(t)
	if !r.Held {
		t.Fatalf("holder worker did not get the lock: %s", r.Err)
	}
	return w, r
}

// try has a worker TryAcquire target, and returns its report.
func (c *checker) try(t *testing.T, target string, env ...string) report {
	t.Helper()
	w := c.s.start(t, "try", append([]string{targetEnv + "=" + target}, env...)...)
	r := w.report(t)
	if err := w.wait(); err != nil {
		t.Fatalf("try worker: %v", err)
	}
	return r
}

// Workers processes increment one counter Increments times each, each
// increment under the lock: the count must come out exact, the log must
// hold every acquisition of every worker, and the tokens, logged in the
// order of acquisition, must strictly increase.
func (c *checker) exclusion(t *testing.T) {
	workers, each := c.s.pressure()
	target := c.s.target(t)
	dir := t.TempDir()
	counter, log := filepath.Join(dir, "counter"), filepath.Join(dir, "tokens")
	var ws []*worker
	for range workers {
		ws = append(ws, c.s.start(t, "count", targetEnv+"="+target, countEnv+"="+counter,
			logEnv+"="+log, nEnv+"="+strconv.Itoa(each)))
	}
	for _, w := range ws {
		if err := w.wait(); err != nil {
			t.Fatalf("count worker: %v", err)
		}
	}
	b, err := os.ReadFile(counter)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(workers*each) {
		t.Errorf("counter = %s after %d increments under the lock: increments were lost", got, workers*each)
	}
	logged, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(logged)), "\n")
	if len(lines) != workers*each {
		t.Errorf("the log holds %d acquisitions, want %d", len(lines), workers*each)
	}
	pids := map[string]bool{}
	var last uint64
	for i, line := range lines {
		pid, tok, _ := strings.Cut(line, " ")
		pids[pid] = true
		if c.s.NoTokens != "" {
			continue
		}
		n, err := strconv.ParseUint(tok, 10, 64)
		if err != nil || n <= last {
			t.Fatalf("acquisition %d has token %q after %d: tokens must strictly increase", i, tok, last)
		}
		last = n
	}
	if len(pids) != workers {
		t.Errorf("acquisitions from %d processes, want %d", len(pids), workers)
	}
}

// TryAcquire of a held lock fails at once with ErrBusy and names the
// holder, in another process and in the holder's own: two acquisitions
// in one process exclude each other as two processes do.
func (c *checker) tryBusy(t *testing.T) {
	target := c.s.target(t)
	held := c.acquire(t, target)
	// Asking for the token makes sure the holder's record is written (a
	// kernel lock may write it lazily), so that the holder can be named
	// on every system.
	held.Token()
	r := c.try(t, target)
	if !r.Busy {
		t.Fatalf("TryAcquire of a held lock: held %v, error %q; want ErrBusy", r.Held, r.Err)
	}
	checkNamed(t, "another process's TryAcquire", r.HolderPID, r.Err, os.Getpid())

	l, err := hold.TryAcquire(target, c.opts...)
	if err == nil {
		l.Release()
		t.Fatal("a second TryAcquire in the holder's process got the lock")
	}
	if !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("a second TryAcquire in the holder's process = %v; want ErrBusy", err)
	}
	checkNamed(t, "the holder's own TryAcquire", holderPID(err), err.Error(), os.Getpid())

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	l, err = hold.Acquire(ctx, target, c.opts...)
	if err == nil {
		l.Release()
		t.Fatal("a second Acquire in the holder's process got the lock")
	}
	if !errors.Is(err, hold.ErrTimeout) {
		t.Errorf("a second Acquire in the holder's process, past its deadline = %v; want ErrTimeout", err)
	}
}

// checkNamed checks that a busy error names the holder, want, in the
// error and in its message.
func checkNamed(t *testing.T, what string, named int, msg string, want int) {
	t.Helper()
	if named != want {
		t.Errorf("%s: the busy error names pid %d, not the holder %d: %s", what, named, want, msg)
	}
	if !strings.Contains(msg, "pid "+strconv.Itoa(want)) {
		t.Errorf("%s: the busy error's message does not name pid %d: %s", what, want, msg)
	}
}

// A wait ends with its context, as a timeout or as a cancellation, not
// both, and an abandoned wait leaves nothing held.
func (c *checker) waitEnds(t *testing.T) {
	target := c.s.target(t)
	w, _ := c.holder(t, target)

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := hold.Acquire(ctx, target, c.opts...)
	cancel()
	if !errors.Is(err, hold.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire past its deadline = %v; want ErrTimeout and context.DeadlineExceeded", err)
	} else if errors.Is(err, context.Canceled) {
		t.Errorf("Acquire past its deadline = %v; it must not match context.Canceled", err)
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = hold.Acquire(ctx, target, c.opts...)
	if !errors.Is(err, context.Canceled) || errors.Is(err, hold.ErrTimeout) {
		t.Errorf("Acquire whose context was cancelled = %v; want context.Canceled, not ErrTimeout", err)
	}

	if err := w.wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	// Neither abandoned wait may have left the lock held.
	r := c.try(t, target)
	if !r.Held {
		t.Errorf("after the holder released, TryAcquire failed: %s (did an abandoned wait keep the lock?)", r.Err)
	}
}

// Release is idempotent; Check after it says the lock was released.
func (c *checker) releaseIdempotent(t *testing.T) {
	target := c.s.target(t)
	l := c.acquire(t, target)
	if err := l.Check(); err != nil {
		t.Errorf("Check of a held lock = %v", err)
	}
	if err := l.Release(); err != nil {
		t.Fatalf("Release = %v", err)
	}
	if err := l.Release(); err != nil {
		t.Errorf("second Release = %v; want nil", err)
	}
	if err := l.Check(); !errors.Is(err, hold.ErrReleased) {
		t.Errorf("Check after Release = %v; want ErrReleased", err)
	}
	// The lock is free for the next holder.
	if r := c.try(t, target); !r.Held {
		t.Errorf("after Release, TryAcquire failed: %s", r.Err)
	}
}

// Tokens strictly increase from holder to holder, in this process and
// others; a protocol without tokens says why.
func (c *checker) tokens(t *testing.T) {
	target := c.s.target(t)
	if c.s.NoTokens != "" {
		l := c.acquire(t, target)
		if err := l.TokenError(); !errors.Is(err, hold.ErrNoToken) {
			t.Errorf("TokenError = %v; want ErrNoToken (%s)", err, c.s.NoTokens)
		}
		return
	}
	var last uint64
	for i := range 6 {
		var tok uint64
		if i%2 == 0 {
			l := c.acquire(t, target)
			if err := l.TokenError(); err != nil {
				t.Fatalf("TokenError = %v", err)
			}
			tok = l.Token()
			l.Release()
		} else {
			r := c.try(t, target)
			if !r.Held {
				t.Fatalf("worker's TryAcquire of a free lock: %s", r.Err)
			}
			tok = r.Token
		}
		if tok <= last {
			t.Fatalf("holder %d got token %d after %d: tokens must strictly increase", i, tok, last)
		}
		last = tok
	}
}

// Shared holds admit readers and exclude writers, or are refused.
func (c *checker) shared(t *testing.T) {
	target := c.s.target(t)
	if !c.s.Shared {
		ctx, cancel := context.WithTimeout(context.Background(), hangBound)
		defer cancel()
		l, err := hold.Acquire(ctx, target, c.with(hold.Shared())...)
		if err == nil {
			l.Release()
		}
		if !errors.Is(err, hold.ErrUnsupported) {
			t.Errorf("a shared Acquire = %v; want ErrUnsupported", err)
		}
		return
	}
	c.acquire(t, target, hold.Shared())
	if r := c.try(t, target, sharedEnv+"=1"); !r.Held {
		t.Errorf("a second reader was refused while a reader holds the lock: %s", r.Err)
	}
	if r := c.try(t, target); !r.Busy {
		t.Errorf("a writer's TryAcquire while a reader holds the lock: held %v, error %q; want ErrBusy", r.Held, r.Err)
	}
}

// Inspect names the holder, its protocol and its token while the lock is
// held, and free after.
func (c *checker) inspect(t *testing.T) {
	target := c.s.target(t)
	w, r := c.holder(t, target)
	st, err := hold.Inspect(target, c.opts...)
	if err != nil {
		t.Fatalf("Inspect of a held lock: %v", err)
	}
	if st.State != hold.HeldExclusive {
		t.Errorf("Inspect of a held lock: state %v, want %v", st.State, hold.HeldExclusive)
	}
	if h := st.Holder; h == nil || (h.Owner == nil || h.Owner.PID != r.PID) && !containsPID(h.PIDs, r.PID) {
		t.Errorf("Inspect of a held lock names %v, not the holder, pid %d", st.Holder, r.PID)
	}
	if st.Protocol != r.Protocol {
		t.Errorf("Inspect of a held lock: protocol %q, but the holder's lock says %q", st.Protocol, r.Protocol)
	}
	if h := st.Holder; h != nil && h.Owner != nil && h.Owner.Protocol != r.Protocol {
		t.Errorf("Inspect of a held lock: the owner record says protocol %q, the holder's lock %q", h.Owner.Protocol, r.Protocol)
	}
	if c.s.NoTokens == "" && st.Fence != r.Token {
		t.Errorf("Inspect of a held lock: fence %d, but the holder's token is %d", st.Fence, r.Token)
	}
	if err := w.wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	st, err = hold.Inspect(target, c.opts...)
	if err != nil {
		t.Fatalf("Inspect of a released lock: %v", err)
	}
	if st.State != hold.Free {
		t.Errorf("Inspect of a released lock: state %v, want %v", st.State, hold.Free)
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

// A lock taken away from its holder is reported by Check and Lost.
func (c *checker) lost(t *testing.T) {
	if c.s.Lose == nil {
		why := c.s.LoseSkip
		if why == "" {
			why = "the subject gives no way to take a lock away (Subject.Lose)"
		}
		t.Skip(why)
	}
	// A holder watching Lost before the loss: Check looks at the lock
	// itself, so it reports the loss as soon as Lose has returned, and
	// the channel the holder watches closes. The lock is then free for a
	// newcomer (a portable holder keeps its place at the local gate until
	// it finds the loss), and the old holder's Release leaves the
	// newcomer's lock alone.
	target := c.s.target(t)
	l := c.acquire(t, target)
	lost := l.Lost()
	c.s.Lose(t, l)
	if err := l.Check(); !errors.Is(err, hold.ErrLost) {
		t.Fatalf("Check of a lock taken away = %v; want ErrLost", err)
	}
	select {
	case <-lost:
	case <-time.After(hangBound):
		t.Fatal("Check found the lock lost, but Lost was not closed")
	}
	newcomer := c.acquire(t, target)
	c.releaseLost(t, l)
	if err := newcomer.Check(); err != nil {
		t.Errorf("the newcomer's Check, after the old holder's Release = %v; want nil", err)
	}
	if err := newcomer.Release(); err != nil {
		t.Errorf("the newcomer's Release = %v", err)
	}

	// A holder that only waits on Lost, and never calls Check: the
	// protocol watches its lock itself and closes Lost (a kernel lock's
	// file looked at, a heartbeat, a lease, a session), so that `hold
	// run` and the agent, which act on Lost alone, hear of every loss.
	l = c.acquire(t, c.s.target(t))
	lost = l.Lost()
	c.s.Lose(t, l)
	select {
	case <-lost:
	case <-time.After(hangBound):
		t.Fatal("a lock taken away from a holder that waits on Lost alone: Lost was not closed (the protocol does not watch its lock)")
	}
	c.releaseLost(t, l)

	// A holder that never asked for Lost: Check finds the loss all the
	// same, and Lost, asked afterwards, is closed already.
	l = c.acquire(t, c.s.target(t))
	c.s.Lose(t, l)
	if err := l.Check(); !errors.Is(err, hold.ErrLost) {
		t.Fatalf("Check of a lock taken away, Lost never asked = %v; want ErrLost", err)
	}
	select {
	case <-l.Lost():
	default:
		t.Error("Check found the lock lost, but Lost asked afterwards is not closed")
	}
	c.releaseLost(t, l)
}

// releaseLost checks that Release of a lost lock, and every Release
// after it, reports the loss.
func (c *checker) releaseLost(t *testing.T, l *hold.Lock) {
	t.Helper()
	for i := range 2 {
		if err := l.Release(); !errors.Is(err, hold.ErrLost) {
			t.Errorf("Release #%d of a lost lock = %v; want ErrLost", i+1, err)
		}
	}
}

// A holder in another process excludes this one until it is killed with
// SIGKILL; then the lock is free within the protocol's promise, and the
// next holder's token is above the killed one's.
func (c *checker) crash(t *testing.T) {
	target := c.s.target(t)
	w, r := c.holder(t, target)
	if l, err := hold.TryAcquire(target, c.opts...); err == nil {
		l.Release()
		t.Fatal("TryAcquire got the lock a worker holds")
	} else if !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("TryAcquire of the lock a worker holds = %v; want ErrBusy", err)
	}
	w.kill()
	ctx, cancel := context.WithTimeout(context.Background(), c.s.CrashFree+hangBound)
	defer cancel()
	start := time.Now()
	l, err := hold.Acquire(ctx, target, c.opts...)
	if err != nil {
		t.Fatalf("Acquire after the holder was killed: %v", err)
	}
	if c.s.NoTokens == "" && l.Token() <= r.Token {
		t.Errorf("token %d after the killed holder's %d: tokens must strictly increase", l.Token(), r.Token)
	}
	l.Release()
	if took := time.Since(start); took > c.s.CrashFree+10*time.Second {
		t.Errorf("the killed holder's lock was free only after %v; the protocol promises %v", took, c.s.CrashFree)
	}
}

// Foreign content at a lock path is never written or deleted.
func (c *checker) foreign(t *testing.T) {
	if c.s.LockPath == nil {
		t.Skip("the protocol's locks are not files at a path derived from the target")
	}
	target := c.s.target(t)
	path := c.s.LockPath(target)
	content := []byte("not a lock: someone's data\n")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	l, err := hold.Acquire(ctx, target, c.opts...)
	if err == nil {
		l.Release()
		t.Errorf("Acquire on foreign content at %s succeeded; want ErrForeign", path)
	} else if !errors.Is(err, hold.ErrForeign) {
		t.Errorf("Acquire on foreign content at %s = %v; want ErrForeign", path, err)
	}
	if _, err := hold.TryAcquire(target, c.opts...); !errors.Is(err, hold.ErrForeign) {
		t.Errorf("TryAcquire on foreign content = %v; want ErrForeign", err)
	}
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, content) {
		t.Errorf("foreign content at %s changed: %q, %v", path, got, err)
	}
}

// Invalid lock names are refused before anything is made.
func (c *checker) badNames(t *testing.T) {
	for _, name := range []string{"", "../up", "a/b", "UPPER", ".hidden", strings.Repeat("x", 65)} {
		l, err := hold.TryAcquire("", c.with(hold.Named(name))...)
		if err == nil {
			l.Release()
		}
		if !errors.Is(err, hold.ErrInvalidName) {
			t.Errorf("a lock named %q = %v; want ErrInvalidName", name, err)
		}
	}
}
