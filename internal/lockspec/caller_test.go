package lockspec_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/internal/testenv"
)

// TestCallerNamedInDeadlock: a request made for another program (the
// agent's client, Spec.Caller) names that program in a deadlock error,
// with a bounded wait as with an unbounded one: the wait's own deadline
// keeps the caller on its context.
func TestCallerNamedInDeadlock(t *testing.T) {
	testenv.SkipUnderWine(t, "a process started from Linux has no Windows parent: its parent pid names no process")
	target := filepath.Join(t.TempDir(), "t")
	l, err := hold.TryAcquire(target)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	caller := os.Getppid()
	want := fmt.Sprintf("(pid %d, through %s pid %d", caller, filepath.Base(os.Args[0]), os.Getpid())
	for _, wait := range []time.Duration{0, time.Minute} {
		s := lockspec.Spec{Target: target, FailIfHeldHere: true, Caller: caller, Wait: wait, WaitGiven: wait > 0}
		r, err := s.Resolve()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		_, err = r.Acquire(ctx, nil)
		cancel()
		r.Close()
		if !errors.Is(err, hold.ErrDeadlock) || !strings.Contains(err.Error(), want) {
			t.Errorf("wait %v: %v, want ErrDeadlock naming %q", wait, err, want)
		}
	}
}
