package lockspec

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/errkind"
)

// TestResolveModeAndFields checks that the request's mode and owner
// fields reach the lock: two shared requests hold at once and keep an
// exclusive one out, and the fields are in the owner record.
func TestResolveModeAndFields(t *testing.T) {
	t.Setenv(ProtocolEnv, "")
	target := filepath.Join(t.TempDir(), "data")
	shared := Spec{Target: target, Shared: true, Nonblock: true, Fields: []Field{{"job", "build"}, {"stage", "2"}}}
	r, err := shared.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if !r.Key.Shared || r.Key.Fair {
		t.Errorf("key %+v", r.Key)
	}
	a, err := r.Acquire(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	b, err := r.Acquire(context.Background(), nil)
	if err != nil {
		t.Fatalf("a second shared holder: %v", err)
	}
	defer b.Release()
	if o := a.Owner(); !o.Shared || o.Fields["job"] != "build" || o.Fields["stage"] != "2" {
		t.Errorf("owner %+v", o)
	}
	ex, err := (&Spec{Target: target, Nonblock: true}).Resolve()
	if err != nil {
		t.Fatal(err)
	}
	if l, err := ex.Acquire(context.Background(), nil); !errors.Is(err, hold.ErrBusy) {
		if l != nil {
			l.Release()
		}
		t.Errorf("exclusive beside two shared holders: %v, want ErrBusy", err)
	}
}

// TestAcquireInterrupted checks that a wait a signal ends is a
// *errkind.SignalError (exit 128+N) that says "gave up waiting", not Go's
// "context canceled".
func TestAcquireInterrupted(t *testing.T) {
	t.Setenv(ProtocolEnv, "")
	target := filepath.Join(t.TempDir(), "data")
	held, err := hold.TryAcquire(target)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	r, err := (&Spec{Target: target}).Resolve()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	time.AfterFunc(50*time.Millisecond, func() { cancel(&errkind.SignalError{Sig: syscall.SIGTERM}) })
	_, err = r.Acquire(ctx, nil)
	var sig *errkind.SignalError
	if !errors.As(err, &sig) || sig.Sig != syscall.SIGTERM || !strings.Contains(err.Error(), "gave up waiting") ||
		!errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want a SIGTERM SignalError that gave up waiting", err)
	}
}

// TestDebugOptions checks which values of HOLD_DEBUG turn the library's
// debug events on.
func TestDebugOptions(t *testing.T) {
	for v, on := range map[string]bool{"": false, "0": false, "false": false, "1": true, "true": true, "yes": true} {
		t.Setenv(DebugEnv, v)
		if got := len(DebugOptions()) > 0; got != on {
			t.Errorf("%s=%q: on %v, want %v", DebugEnv, v, got, on)
		}
	}
}

// TestRoundDuration checks the precision messages show.
func TestRoundDuration(t *testing.T) {
	for d, want := range map[time.Duration]time.Duration{
		1234567 * time.Microsecond:            1200 * time.Millisecond,
		250400 * time.Microsecond:             250 * time.Millisecond,
		3*time.Minute + 4400*time.Millisecond: 3*time.Minute + 4*time.Second,
	} {
		if got := RoundDuration(d); got != want {
			t.Errorf("RoundDuration(%v) = %v, want %v", d, got, want)
		}
	}
}
