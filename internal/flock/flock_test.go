package flock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/lock"
)

func request(path string, shared bool) *lock.Request {
	r := &lock.Request{Path: path, Shared: shared, Owner: proc.Self()}
	r.Owner.ID = "test"
	return r
}

// free reports, eventually, whether a fresh descriptor can take the lock
// at path exclusively; bound only catches a lock left held.
func freeSoon(t *testing.T, path string, bound time.Duration) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		f, _, err := openLockFile(path, openMode{})
		if err != nil {
			t.Fatal(err)
		}
		err = f.lock(false, false)
		if err == nil {
			f.unlock()
			f.close()
			return
		}
		f.close()
		if time.Now().After(deadline) {
			t.Fatalf("lock %s still held after %v", path, bound)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestAbandonedWaitNeverKeepsLock races the end of a wait against the
// release that would grant it, many times: whichever wins, the lock ends
// up free (or held by the waiter, which then releases it), never stuck.
func TestAbandonedWaitNeverKeepsLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	var p Protocol
	rounds := 200
	if testing.Short() {
		rounds = 30
	}
	granted, abandoned := 0, 0
	for i := range rounds {
		// The last round's abandoned wait may still be handing the lock
		// back: wait for it (bounded, to catch one that never does).
		bctx, bcancel := context.WithTimeout(context.Background(), 10*time.Second)
		holder, err := p.Acquire(bctx, request(path, false))
		bcancel()
		if err != nil {
			t.Fatal(err)
		}
		d := time.Duration(rand.IntN(300)) * time.Microsecond
		ctx, cancel := context.WithTimeout(context.Background(), d)
		go func() {
			time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
			holder.Release()
		}()
		h, err := p.Acquire(ctx, request(path, i%3 == 0))
		cancel()
		switch {
		case err == nil:
			granted++
			if err := h.Release(); err != nil {
				t.Fatal(err)
			}
		case errors.Is(err, lock.ErrTimeout):
			abandoned++
		default:
			t.Fatalf("round %d: %v", i, err)
		}
		freeSoon(t, path, 10*time.Second)
	}
	t.Logf("%d granted, %d abandoned", granted, abandoned)
}

// TestCancelledWaitReturnsAtOnce: the wait ends when the context does, and
// its error wraps the context's.
func TestCancelledWaitReturnsAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	var p Protocol
	holder, err := p.TryAcquire(request(path, false))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	_, err = p.Acquire(ctx, request(path, false))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want context.Canceled", err)
	}
	var e *lock.Error
	if !errors.As(err, &e) || e.Holder == nil || e.Holder.Owner == nil || e.Holder.Owner.PID != os.Getpid() {
		t.Fatalf("error %v does not name the holder", err)
	}
	holder.Release()
	freeSoon(t, path, 10*time.Second)
}

func TestLastFence(t *testing.T) {
	o := proc.Self()
	o.Fence = 41
	rec := o.Encode()
	before := uint64(time.Now().UnixMicro())
	for _, c := range []struct {
		name    string
		size    int64
		raw     []byte
		atLeast uint64
		exact   bool
	}{
		{"empty file", 0, nil, 0, true},
		{"record", int64(len(rec)), rec, 41, true},
		{"padded record", int64(len(rec) + 10), append(bytes.Clone(rec), "          "...), 41, true},
		{"garbage", 7, []byte("garbage"), before, false},
		{"no fence", 9, []byte(`{"pid":1}`), before, false},
		{"too big to read", lock.MaxRecordSize + 1, nil, before, false},
	} {
		got := lastFence(c.size, c.raw)
		if c.exact && got != c.atLeast || !c.exact && got < c.atLeast {
			t.Errorf("%s: lastFence = %d, want %d%s", c.name, got, c.atLeast, map[bool]string{false: " or more"}[c.exact])
		}
	}
}

// TestRecordRewrite: a new record overwrites a slightly longer one by
// padding and cuts a much longer one, and the result always decodes.
func TestRecordRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	var p Protocol
	acquire := func(fields map[string]string) *handle {
		t.Helper()
		r := request(path, false)
		r.Owner.Fields = fields
		h, err := p.TryAcquire(r)
		if err != nil {
			t.Fatal(err)
		}
		h.Fence() // the record is written once the token is asked for
		return h.(*handle)
	}
	check := func(what string, wantSize int64, fence uint64) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		o, ok := lock.DecodeOwner(b)
		if !ok || o.Fence != fence {
			t.Fatalf("%s: record %q does not decode to fence %d", what, b, fence)
		}
		if wantSize >= 0 && int64(len(b)) != wantSize {
			t.Fatalf("%s: file has %d bytes, want %d", what, len(b), wantSize)
		}
	}
	// Held, the file is the holder's record; released, only the past
	// record, however long the holder's was.
	for i, pad := range []int{100, 0, 2000, 0} {
		var fields map[string]string
		if pad > 0 {
			fields = map[string]string{"pad": strings.Repeat("x", pad)}
		}
		h := acquire(fields)
		check(fmt.Sprintf("held, %d bytes of fields", pad), int64(len(h.owner.Encode())), uint64(i+1))
		h.Release()
		check(fmt.Sprintf("released, %d bytes of fields", pad), int64(lock.PastRecordLen(uint64(i+1))), uint64(i+1))
	}

	if err := os.WriteFile(path, []byte(`{"fence":18446744073709551615,"released":true}`), 0o644); err != nil {
		t.Fatal(err)
	}
	h := acquire(nil)
	h.Release()
	if h.Fence() != math.MaxUint64 {
		t.Fatalf("after a maximal fence: %d, want it kept rather than wrapped", h.Fence())
	}
}

func TestSharedDoesNotWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	var p Protocol
	h, err := p.TryAcquire(request(path, false))
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	before, _ := os.ReadFile(path)
	s1, err := p.TryAcquire(request(path, true))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := p.TryAcquire(request(path, true))
	if err != nil {
		t.Fatalf("a second shared holder: %v", err)
	}
	if s1.Fence() != h.Fence() || s2.Fence() != h.Fence() || !s1.Owner().Shared {
		t.Fatalf("shared fences %d %d, want the last exclusive %d", s1.Fence(), s2.Fence(), h.Fence())
	}
	if _, err := p.TryAcquire(request(path, false)); !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("exclusive beside shared holders: %v", err)
	}
	st, err := p.Inspect(path)
	if err != nil || st.State != lock.HeldShared {
		t.Fatalf("Inspect: %+v %v", st, err)
	}
	s1.Release()
	s2.Release()
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("a shared holder rewrote the record")
	}
}

func TestInspect(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.lock")
	var p Protocol
	st, err := p.Inspect(path)
	if err != nil || st.State != lock.Free || st.Holder != nil {
		t.Fatalf("no lock file: %+v %v", st, err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("Inspect created the lock file")
	}
	h, err := p.TryAcquire(request(path, false))
	if err != nil {
		t.Fatal(err)
	}
	st, err = p.Inspect(path)
	if err != nil || st.State != lock.HeldExclusive || st.Holder.Owner.PID != os.Getpid() || st.Fence != h.Fence() || st.Holder.Alive != lock.Alive {
		t.Fatalf("held: %+v %v", st, err)
	}
	// Inspect's probes must leave the holder's lock alone.
	if _, err := p.TryAcquire(request(path, false)); !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("after Inspect: %v", err)
	}
	h.Release()
	st, err = p.Inspect(path)
	if err != nil || st.State != lock.Free || st.Holder == nil || st.Holder.Owner.Fence != h.Fence() {
		t.Fatalf("released: %+v %v", st, err)
	}
	// Inspect's probes must leave a free lock free.
	h, err = p.TryAcquire(request(path, false))
	if err != nil {
		t.Fatalf("after Inspect of a free lock: %v", err)
	}
	h.Release()
}

// TestFileAndRelease: the *os.File a caller gets shares the lock, is in
// blocking mode, and Release closes it; Release and Check behave.
func TestFileAndRelease(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	var p Protocol
	h, err := p.TryAcquire(request(path, false))
	if err != nil {
		t.Fatal(err)
	}
	h.Fence() // the record is written once the token is asked for
	hf, ok := h.(lock.Filer)
	if !ok {
		t.Fatal("a kernel lock handle has no File")
	}
	f := hf.File()
	if f == nil || f != hf.File() {
		t.Fatal("File is not one stable *os.File")
	}
	b := make([]byte, 5)
	if _, err := f.ReadAt(b, 0); err != nil || string(b) != `{"fen` {
		t.Fatalf("reading the lock file through File: %q %v", b, err)
	}
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.Lost():
		t.Fatal("lost")
	default:
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if err := h.Check(); !errors.Is(err, lock.ErrReleased) {
		t.Fatalf("Check after Release: %v", err)
	}
	if _, err := f.ReadAt(b, 0); err == nil {
		t.Fatal("the File is still open after Release")
	}
	h2, err := p.TryAcquire(request(path, false))
	if err != nil {
		t.Fatalf("after Release: %v", err)
	}
	// The owner record handed out is a copy.
	o := h2.Owner()
	o.Command[0] = "changed"
	if h2.Owner().Command[0] == "changed" {
		t.Fatal("Owner returns the handle's own slice")
	}
	h2.Release()
}

// lockWithoutRecord takes the lock at path exclusively the way flock(1)
// does, writing no owner record, until the test ends.
func lockWithoutRecord(t *testing.T, path string) *lockFile {
	t.Helper()
	f, _, err := openLockFile(path, openMode{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.close() })
	if err := f.lock(false, false); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestHolderWithoutRecord: a holder that writes no record (flock(1), or
// hold on a read-only file) is still found, through /proc/locks on Linux.
func TestHolderWithoutRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	f := lockWithoutRecord(t, path)
	var p Protocol
	_, err := p.TryAcquire(request(path, false))
	var e *lock.Error
	if !errors.As(err, &e) || !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("%v", err)
	}
	t.Logf("%v", err)
	if len(proc.LockHolders(f.procFd())) > 0 {
		if len(e.Holder.PIDs) != 1 || e.Holder.PIDs[0] != os.Getpid() {
			t.Fatalf("holder pids %v, want this process", e.Holder.PIDs)
		}
	}
}

// TestLeftoverRecordNotNamed: after a release the record says so, and a
// holder that writes none (flock(1), a read-only lock file) is not
// mistaken for the last one.
func TestLeftoverRecordNotNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	var p Protocol
	h, err := p.TryAcquire(request(path, false))
	if err != nil {
		t.Fatal(err)
	}
	h.Fence() // the record is written once the token is asked for
	if b, _ := os.ReadFile(path); !bytes.Contains(b, []byte(`"released":false`)) {
		t.Fatalf("a held lock's record: %s", b)
	}
	h.Release()
	b, _ := os.ReadFile(path)
	o, ok := lock.DecodeOwner(b)
	if !ok || !o.Released || o.Fence != h.Fence() {
		t.Fatalf("after release the record is %s, want it marked released with fence %d", b, h.Fence())
	}
	f := lockWithoutRecord(t, path)
	_, err = p.TryAcquire(request(path, false))
	var e *lock.Error
	if !errors.As(err, &e) || !errors.Is(err, lock.ErrBusy) || e.Holder == nil {
		t.Fatalf("%v", err)
	}
	if e.Holder.Owner != nil {
		t.Fatalf("the released record was taken for the holder's: %v", err)
	}
	t.Log(err)
	st, err := p.Inspect(path)
	if err != nil || st.State != lock.HeldExclusive || st.Fence != h.Fence() || st.Holder.Owner != nil {
		t.Fatalf("Inspect: %+v %v", st, err)
	}
	f.unlock()
	st, err = p.Inspect(path)
	if err != nil || st.State != lock.Free || st.Holder == nil || st.Holder.Owner == nil || !st.Holder.Owner.Released {
		t.Fatalf("Inspect of the free lock: %+v %v; want the last record", st, err)
	}
}

// TestReleasedRecordIsSmall: a released lock file keeps only the past
// record, not the holder's record's length in blanks, and the token still
// rises from holder to holder, a holder with a long record between them.
func TestReleasedRecordIsSmall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	var p Protocol
	var last uint64
	for i, field := range []string{"", strings.Repeat("x", 300), "", "y"} {
		req := request(path, false)
		if field != "" {
			req.Owner.Fields = map[string]string{"note": field}
		}
		h, err := p.TryAcquire(req)
		if err != nil {
			t.Fatal(err)
		}
		tok := h.Fence()
		if tok <= last {
			t.Fatalf("holder %d: token %d after %d", i, tok, last)
		}
		last = tok
		h.Release()
		b, _ := os.ReadFile(path)
		if want := fmt.Sprintf(`{"fence":%d,"released":true}`+"\n", tok); string(b) != want {
			t.Fatalf("holder %d: released lock file holds %q (%d bytes), want %q", i, b, len(b), want)
		}
	}
}

// TestCheckFindsRemovedOrReplacedFile: a kernel lock whose lock file is
// removed or replaced no longer excludes newcomers; Check says so at once,
// Lost closes and Release reports it.
func TestCheckFindsRemovedOrReplacedFile(t *testing.T) {
	testenv.SkipUnderWine(t, "a removed file that is still open keeps its name until its last handle closes, and no file can be renamed over it, as before Windows 10")
	dir := t.TempDir()
	path := filepath.Join(dir, "t.lock")
	var p Protocol
	for _, damage := range []struct {
		name string
		do   func() error
	}{
		{"removed", func() error { return os.Remove(path) }},
		{"replaced", func() error {
			tmp := filepath.Join(dir, "new")
			if err := os.WriteFile(tmp, nil, 0o644); err != nil {
				return err
			}
			return os.Rename(tmp, path)
		}},
	} {
		h, err := p.TryAcquire(request(path, false))
		if err != nil {
			t.Fatal(err)
		}
		lost := h.Lost()
		if err := h.Check(); err != nil {
			t.Fatalf("%s: Check before: %v", damage.name, err)
		}
		if err := damage.do(); err != nil {
			t.Fatal(err)
		}
		// (The watch Lost started may find the loss first: Check must
		// find it all the same, and at once.)
		if err := h.Check(); !errors.Is(err, lock.ErrLost) {
			t.Fatalf("%s: Check: %v, want ErrLost", damage.name, err)
		}
		select {
		case <-lost:
		default:
			t.Fatalf("%s: Lost not closed after Check found the loss", damage.name)
		}
		select {
		case <-h.Lost():
		default:
			t.Fatalf("%s: a later Lost channel is open", damage.name)
		}
		for range 2 {
			if err := h.Release(); !errors.Is(err, lock.ErrLost) {
				t.Fatalf("%s: Release: %v, want ErrLost", damage.name, err)
			}
		}
		// A newcomer locks the new file.
		h2, err := p.TryAcquire(request(path, false))
		if err != nil {
			t.Fatal(err)
		}
		if err := h2.Check(); err != nil {
			t.Fatal(err)
		}
		h2.Release()
	}
}
