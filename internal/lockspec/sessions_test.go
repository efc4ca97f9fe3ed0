package lockspec

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hold-dev/hold"
)

// keptProto is a network protocol as far as KeepSessions sees one: it can
// be closed, and counts it.
type keptProto struct {
	hold.Protocol
	closed atomic.Int32
}

func (*keptProto) Name() string   { return "kepttest" }
func (p *keptProto) Close() error { p.closed.Add(1); return nil }

// registerKeptTest registers the scheme kepttest://KEY/path, whose KEY
// stands for the connection and settings, until the test ends (the other
// tests see only the schemes of the executable).
func registerKeptTest(t *testing.T) {
	t.Cleanup(func() { delete(schemes, "kepttest"); delete(sessionSchemes, "kepttest") })
	RegisterScheme("kepttest", func(target string, s *Spec) (hold.Protocol, string, error) {
		return &keptProto{}, target, nil
	})
	RegisterSessionScheme("kepttest", func(target string, s *Spec) (*Session, error) {
		key, path, _ := strings.Cut(strings.TrimPrefix(target, "kepttest://"), "/")
		return &Session{Key: key, Path: path, Dial: func() (hold.Protocol, error) { return &keptProto{}, nil }}, nil
	})
}

// TestKeepSessions: requests with one session key share one protocol,
// another key gets its own, the protocol is closed once unused for the
// idle time (and dialled again after), and closeAll closes what is kept.
// Without KeepSessions every request dials and closes its own.
func TestKeepSessions(t *testing.T) {
	registerKeptTest(t)
	resolve := func(target string) *Resolved {
		t.Helper()
		r, err := (&Spec{Target: target}).Resolve()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	alone := resolve("kepttest://a/x")
	alone.Close()
	if p := alone.Proto.(*keptProto); p.closed.Load() != 1 {
		t.Fatalf("without KeepSessions, a request's protocol was closed %d times, want 1", p.closed.Load())
	}

	closeAll := KeepSessions(time.Hour)
	r1, r2, r3 := resolve("kepttest://a/x"), resolve("kepttest://a/y"), resolve("kepttest://b/x")
	if r1.Proto != r2.Proto || r1.Proto == r3.Proto || Dials() != 2 {
		t.Fatalf("same key shares: %v, other key shares: %v, dials %d; want true, false, 2", r1.Proto == r2.Proto, r1.Proto == r3.Proto, Dials())
	}
	a := r1.Proto.(*keptProto)
	r1.Close()
	r1.Close() // twice is once
	r2.Close()
	if n := a.closed.Load(); n != 0 {
		t.Fatalf("a kept protocol was closed %d times as its requests ended, want 0 before its idle time", n)
	}
	r4 := resolve("kepttest://a/z")
	if r4.Proto != a || Dials() != 2 {
		t.Fatalf("a request after the others ended dialled again (dials %d)", Dials())
	}
	r4.Close()
	closeAll()
	if a.closed.Load() != 1 || r3.Proto.(*keptProto).closed.Load() != 1 {
		t.Fatalf("closeAll closed the kept protocols %d and %d times, want 1 and 1", a.closed.Load(), r3.Proto.(*keptProto).closed.Load())
	}
	r3.Close() // after closeAll: nothing more to close
	if n := r3.Proto.(*keptProto).closed.Load(); n != 1 {
		t.Fatalf("closed %d times, want 1", n)
	}

	// An idle protocol is closed, and the next request dials anew.
	closeAll = KeepSessions(time.Millisecond)
	defer closeAll()
	r5 := resolve("kepttest://a/x")
	p5 := r5.Proto.(*keptProto)
	r5.Close()
	deadline := time.Now().Add(30 * time.Second)
	for p5.closed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("an unused kept protocol was not closed after its idle time")
		}
		time.Sleep(time.Millisecond)
	}
	if r6 := resolve("kepttest://a/x"); r6.Proto == p5 || Dials() != 2 {
		t.Fatalf("after the idle close: same protocol %v, dials %d; want a new one, 2", r6.Proto == p5, Dials())
	} else {
		r6.Close()
	}
}
