package hold_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hold-dev/hold"
)

// On Linux a kernel lock's record is written lazily: when its holder asks
// for the token, or once it has held the lock for a moment. These tests
// look into that window from another process: the holder is named by the
// kernel's pid, never by the record of a past holder, and is named by its
// own record soon after.
func TestLazyRecordWindow(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "t")

	// A past holder, this process, leaves its past record (token 1).
	l, err := hold.Acquire(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	past := l.Token()
	l.Release()

	release := filepath.Join(dir, "release")
	w := startCoreWorker(t, "core-hold", "CORE_TARGET="+target, "CORE_NO_TOKEN=1", "CORE_RELEASE="+release, "CORE_WARM="+filepath.Join(dir, "warm"))
	r := w.report(t, hangBound)
	if r.Err != "" {
		t.Fatalf("worker: %+v", r)
	}

	// However the window looks, no answer names this process (the past
	// holder) and the lock is always held by the worker.
	deadline := time.Now().Add(hangBound)
	sawRecord := false
	for !sawRecord {
		_, err := hold.TryAcquire(target)
		he := holdError(t, "busy while the worker holds", err, hold.ErrBusy)
		if o := he.Holder.Owner; o != nil && o.PID != r.PID {
			t.Fatalf("the busy error names pid %d, not the holder %d: %v", o.PID, r.PID, err)
		}
		if he.Holder.Owner == nil && !slices.Contains(he.Holder.PIDs, r.PID) {
			t.Fatalf("without a record, the busy error does not name the kernel's holder %d: %v", r.PID, err)
		}
		st, err := hold.Inspect(target)
		if err != nil || st.State != hold.HeldExclusive {
			t.Fatalf("Inspect = %+v, %v; want held exclusive", st, err)
		}
		switch o := st.Holder.Owner; {
		case o == nil:
			if !slices.Contains(st.Holder.PIDs, r.PID) {
				t.Fatalf("Inspect without a record names pids %v, not the holder %d", st.Holder.PIDs, r.PID)
			}
		case o.PID != r.PID:
			t.Fatalf("Inspect names pid %d, not the holder %d", o.PID, r.PID)
		default:
			sawRecord = true
			if st.Fence != past+1 {
				t.Errorf("the holder's record carries token %d, want %d", st.Fence, past+1)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the holder's record never appeared")
		}
		time.Sleep(time.Millisecond)
	}
	os.WriteFile(release, nil, 0o644)
	if err := w.wait(t, hangBound); err != nil {
		t.Fatal(err)
	}
}

// Tokens strictly increase for every holder that uses them, whatever the
// holders in between did: one that never asked, one that asked late.
func TestLazyTokensIncrease(t *testing.T) {
	target := filepath.Join(t.TempDir(), "t")
	var last uint64
	for i := 0; i < 20; i++ {
		// Every third holder is another process that never asks.
		if i%3 == 1 {
			w := startCoreWorker(t, "core-hold", "CORE_TARGET="+target, "CORE_NO_TOKEN=1", "CORE_RELEASE=now", "CORE_WARM="+target+"-warm")
			if err := w.wait(t, hangBound); err != nil {
				t.Fatal(err)
			}
			continue
		}
		l, err := hold.Acquire(context.Background(), target)
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 2 {
			time.Sleep(70 * time.Millisecond) // past the delay and the lazy timer's next look (10-60 ms): written unasked
		}
		tok := l.Token()
		if tok <= last || errors.Is(l.TokenError(), hold.ErrNoToken) {
			t.Fatalf("holder %d: token %d after %d (%v)", i, tok, last, l.TokenError())
		}
		last = tok
		l.Release()
	}
}

// A process's first kernel lock is written at once, not lazily: arming
// the lazy timer would start the runtime's poller, which costs a one-lock
// process such as `hold run` more than the write.
func TestFirstHoldWrittenAtOnce(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "t")
	release := filepath.Join(dir, "release")
	w := startCoreWorker(t, "core-hold", "CORE_TARGET="+target, "CORE_NO_TOKEN=1", "CORE_RELEASE="+release)
	r := w.report(t, hangBound)
	if r.Err != "" {
		t.Fatalf("worker: %+v", r)
	}
	st, err := hold.Inspect(target)
	if err != nil || st.Holder == nil || st.Holder.Owner == nil || st.Holder.Owner.PID != r.PID {
		t.Errorf("Inspect = %+v, %v; want the worker's (pid %d) record, written before Acquire returned", st, err, r.PID)
	}
	os.WriteFile(release, nil, 0o644)
	if err := w.wait(t, hangBound); err != nil {
		t.Fatal(err)
	}
}
