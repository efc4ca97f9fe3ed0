package lock

import (
	"sync"
	"sync/atomic"
)

// LostState is the lost-lock state of one Handle: whether the lock was
// found to be no longer its holder's, why, the channel Lost returns, and
// the error Check and Release return from then on. A handle embeds it (or
// keeps one as a field) and calls MarkLost when it finds its lock gone.
// The zero value is a lock not lost; a LostState must not be copied. It
// is opaque: its state is read through its methods.
//
// Asking whether the lock was lost (Marked, Err) is one atomic load, so a
// handle may ask on every Check and Release; the channel is made only when
// someone calls Lost.
type LostState struct {
	mu    sync.Mutex    // guards ch, and the writing of state and why
	state atomic.Uint32 // lostBit once marked, sealedBit once sealed
	ch    chan struct{}
	// more is what a lock that is neither lost nor watched by AfterLost
	// never needs; a pointer keeps LostState at 32 bytes, which keeps the
	// kernel lock's handle in its allocation size class.
	more *lostMore
}

// lostMore is the part of a LostState made only when needed.
type lostMore struct {
	// why is set once, before lostBit, and never written again.
	why string
	// after lists the functions AfterLost registered that have neither
	// run nor been stopped (s.mu).
	after []*afterLost
}

// afterLost is one function registered by AfterLost; its pointer tells
// it from others registered with the same function.
type afterLost struct{ f func() }

// LostNotifier is implemented by handles that can call a function when
// their lock is found lost, without a goroutine waiting on Lost meanwhile
// (hold's Lock.AfterLost finds it, through a Wrapper too). LostState
// implements it.
type LostNotifier interface {
	// AfterLost arranges for f to run in its own goroutine once the lock
	// is found lost, at once if it was already. stop cancels that: it
	// reports whether it stopped f from being run. It watches the lock
	// as Lost does.
	AfterLost(f func()) (stop func() bool)
}

const (
	lostBit   = 1
	sealedBit = 2
)

// Lost returns a channel that is closed once MarkLost has been called,
// which is what Handle.Lost returns.
func (s *LostState) Lost() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
		if s.state.Load()&lostBit != 0 {
			close(s.ch)
		}
	}
	return s.ch
}

// MarkLost records that the lock is lost and why (a phrase that becomes
// the error's Hint), and closes the Lost channel. Only the first call
// counts, and none after Seal: it reports whether this call marked the
// lock, so that the caller does what losing it entails (give up a queue
// place, delete a key) exactly once.
func (s *LostState) MarkLost(why string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state.Load()
	if st != 0 {
		return false
	}
	if s.more == nil {
		s.more = &lostMore{}
	}
	s.more.why = why
	s.state.Store(st | lostBit)
	if s.ch != nil {
		close(s.ch)
	}
	for _, a := range s.more.after {
		go a.f()
	}
	s.more.after = nil
	return true
}

// AfterLost arranges for f to run in its own goroutine once MarkLost marks
// the lock lost, or at once if it has been, as context.AfterFunc does for
// a context: a holder of many locks hears of each loss without a goroutine
// per lock waiting on Lost. stop cancels it and reports whether it stopped
// f from being run. After Seal, f never runs.
func (s *LostState) AfterLost(f func()) (stop func() bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state.Load()&lostBit != 0 {
		go f()
		return func() bool { return false }
	}
	a := &afterLost{f: f}
	if s.more == nil {
		s.more = &lostMore{}
	}
	s.more.after = append(s.more.after, a)
	return func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, b := range s.more.after {
			if b == a {
				s.more.after = append(s.more.after[:i], s.more.after[i+1:]...)
				return true
			}
		}
		return false
	}
}

// Seal makes later calls of MarkLost do nothing. A handle seals its state
// once Release has decided, so that a watcher that notices the released
// lock's absence afterwards does not report it lost.
func (s *LostState) Seal() {
	s.mu.Lock()
	s.state.Store(s.state.Load() | sealedBit)
	s.mu.Unlock()
}

// Marked reports whether MarkLost has marked the lock lost.
func (s *LostState) Marked() bool { return s.state.Load()&lostBit != 0 }

// Err returns nil while the lock is not lost, and afterwards an *Error for
// operation op on path that matches ErrLost, with the reason as its Hint.
func (s *LostState) Err(op, path string) error {
	if s.state.Load()&lostBit == 0 {
		return nil
	}
	// why was written before lostBit was set and is never written again.
	return &Error{Op: op, Path: path, Err: ErrLost, Hint: s.more.why}
}
