package lock

import (
	"errors"
	"sync"
	"testing"
	"unsafe"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestLostState: not lost until marked; the first reason counts; the
// channel closes whether it was asked for before or after; the error
// names the operation and path and matches ErrLost.
func TestLostState(t *testing.T) {
	var s LostState
	early := s.Lost()
	if s.Marked() || closed(early) || s.Err("check", "p") != nil {
		t.Fatal("a fresh LostState reports a loss")
	}
	if !s.MarkLost("first") {
		t.Fatal("the first MarkLost did not count")
	}
	if s.MarkLost("second") {
		t.Fatal("a second MarkLost counted")
	}
	if !s.Marked() || !closed(early) || !closed(s.Lost()) {
		t.Fatal("a marked LostState has an open channel")
	}
	err := s.Err("release", "/x.lock")
	var e *Error
	if !errors.Is(err, ErrLost) || !errors.As(err, &e) || e.Op != "release" || e.Path != "/x.lock" || e.Hint != "first" {
		t.Fatalf("Err = %#v", err)
	}
}

// TestLostStateSeal: once sealed, MarkLost changes nothing, and a loss
// marked before the seal stays.
func TestLostStateSeal(t *testing.T) {
	var s LostState
	s.Seal()
	if s.MarkLost("late") || s.Marked() || closed(s.Lost()) {
		t.Fatal("MarkLost after Seal counted")
	}
	var m LostState
	m.MarkLost("before")
	m.Seal()
	if !m.Marked() || m.Err("check", "p") == nil {
		t.Fatal("Seal undid a loss")
	}
}

// TestLostStateConcurrent: exactly one of many racing MarkLost calls
// counts, and every Lost channel closes (run with -race).
func TestLostStateConcurrent(t *testing.T) {
	var s LostState
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	chans := make(chan (<-chan struct{}), 16)
	for range 8 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if s.MarkLost("race") {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
		go func() {
			defer wg.Done()
			chans <- s.Lost()
			_ = s.Err("check", "p")
		}()
	}
	wg.Wait()
	close(chans)
	if won != 1 {
		t.Fatalf("%d MarkLost calls counted, want 1", won)
	}
	for ch := range chans {
		<-ch
	}
}

// TestLostStateSize: a LostState stays within 32 bytes, as its doc
// promises, so that embedding it keeps a handle in its allocation class.
func TestLostStateSize(t *testing.T) {
	if n := unsafe.Sizeof(LostState{}); n > 32 {
		t.Fatalf("LostState is %d bytes, want at most 32", n)
	}
}

// TestLostStateAfterLost: a function registered before the loss runs once
// it is marked, one registered after runs at once, a stopped one never
// runs, and stop says whether it stopped it.
func TestLostStateAfterLost(t *testing.T) {
	var s LostState
	ran := make(chan string, 4)
	s.AfterLost(func() { ran <- "before" })
	stop := s.AfterLost(func() { ran <- "stopped" })
	if !stop() {
		t.Fatal("stop of a pending function reported it not stopped")
	}
	if stop() {
		t.Fatal("a second stop reported stopping it again")
	}
	select {
	case got := <-ran:
		t.Fatalf("%q ran before the loss", got)
	default:
	}
	s.MarkLost("gone")
	if got := <-ran; got != "before" {
		t.Fatalf("ran %q, want before", got)
	}
	late := s.AfterLost(func() { ran <- "after" })
	if got := <-ran; got != "after" {
		t.Fatalf("ran %q, want after", got)
	}
	if late() {
		t.Fatal("stop after the function ran reported stopping it")
	}
	select {
	case got := <-ran:
		t.Fatalf("%q ran too", got)
	default:
	}

	var sealed LostState
	sealed.AfterLost(func() { ran <- "sealed" })
	sealed.Seal()
	sealed.MarkLost("late")
	select {
	case got := <-ran:
		t.Fatalf("%q ran after Seal", got)
	default:
	}
}
