package lockspec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/proc"
)

// How the waiting message behaves: it appears once a wait has lasted
// waitNoticeAfter, then is refreshed in place every terminalRefresh on a
// terminal, or repeated as a new line at most every logRefresh otherwise
// (a log should not fill up with one line per second).
const (
	waitNoticeAfter = time.Second
	terminalRefresh = time.Second
	logRefresh      = 5 * time.Second
)

// Acquire takes the lock as the request says: at once or not at all with -n,
// waiting at most -w otherwise, until ctx ends in any case. While it waits
// it tells stderr who holds the lock (always on a terminal, with --verbose
// otherwise; a nil stderr keeps it silent). A wait ended by a signal (a
// ctx whose cause is a *errkind.SignalError) returns a *errkind.SignalError
// too, so that the exit status becomes 128+signal.
func (r *Resolved) Acquire(ctx context.Context, stderr *os.File) (*hold.Lock, error) {
	start := time.Now()
	var (
		l   *hold.Lock
		err error
	)
	if r.Nonblock || (r.Timeout > 0 && r.Local()) {
		// -w bounds the wait, not the attempt: a free lock is taken
		// whatever -w says, as -n takes it, even when SECONDS is shorter
		// than opening the lock file takes. So a bounded wait on a local
		// lock tries once first and starts the clock only when the lock
		// is busy. (A network protocol's attempt is a round trip that -w
		// bounds too, connecting included.)
		l, err = hold.TryAcquire(r.Target, r.Opts...)
	}
	if !r.Nonblock && l == nil && (err == nil || errors.Is(err, hold.ErrBusy)) {
		err = nil
		if r.Timeout > 0 || r.Tells(stderr) {
			// The deadline and the waiting notice arm timers, and the
			// first timer makes the Go runtime's poller: see
			// proc.ReadyForLock.
			if err := proc.ReadyForLock("acquire", r.Label); err != nil {
				return nil, err
			}
		}
		wctx := proc.WithCallerKeeps(proc.WithCaller(ctx, r.caller), r.callerKeeps)
		if r.Timeout > 0 {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(wctx, r.Timeout)
			defer cancel()
		}
		stopNotice := r.noticeWhileWaiting(stderr)
		l, err = hold.Acquire(wctx, r.Target, r.Opts...)
		stopNotice()
		if err != nil {
			var sig *errkind.SignalError
			if errors.As(context.Cause(ctx), &sig) {
				err = &errkind.SignalError{Sig: sig.Sig, Err: gaveUp(err)}
			}
		}
	}
	if err == nil && r.Tells(stderr) {
		// flock(1)'s idiom, --lock-file naming the data file itself, works,
		// but without an owner record or token: say so once, where someone
		// reads it (flock(1) itself says nothing).
		if terr := l.TokenError(); errors.Is(terr, hold.ErrForeign) {
			fmt.Fprintf(stderr, "hold: note: %s: locked without an owner record or token (HOLD_TOKEN=0): %s\n", l.Path(), hintOf(terr))
		}
	}
	if err == nil && r.Tells(stderr) {
		r.noteLockedApart(stderr, l)
	}
	if err == nil && r.WarnMachineLocal && stderr != nil {
		warnMachineLocal(stderr, l)
	}
	if err == nil && r.Verbose && stderr != nil {
		fmt.Fprintf(stderr, "hold: acquired %s (%s, token %d) after %s\n",
			l.Path(), modeName(l.Owner().Shared), l.Token(), RoundDuration(time.Since(start)))
	}
	return l, err
}

// Tells reports whether messages about the wait go to stderr: who holds
// the lock while waiting, a busy lock or a timed-out wait, a lock taken
// without a record. Never with Quiet (or a nil stderr); always with
// Verbose; otherwise only on a terminal. Off a terminal (cron, a pipe)
// flock(1) says nothing, and neither does hold: the exit status tells.
// Warnings and errors of other kinds are not messages about the wait.
func (r *Resolved) Tells(stderr *os.File) bool {
	if stderr == nil || r.Quiet {
		return false
	}
	return r.Verbose || isTerminal(stderr)
}

// noteLockedApart says, once the lock is held, that the target file
// itself is locked by another process (flock(1)'s `flock F CMD` takes F's
// own lock, where hold took F.lock), and how to share that lock instead:
// the two exclude nobody from each other (lockedApart); a failure to
// find out says nothing.
func (r *Resolved) noteLockedApart(stderr *os.File, l *hold.Lock) {
	st, err := r.lockedApart()
	if err != nil || st == nil {
		return
	}
	fmt.Fprintf(stderr, "hold: note: %s itself is %s by %s, a lock this one does not exclude: hold locked %s, while `flock %s` locks %s itself; to share that lock, use --lock-file %s\n",
		r.Target, st.State, st.Holder, l.Path(), r.Target, r.Target, r.Target)
}

// warnMachineLocal prints one line on stderr when l is a kernel lock on a
// filesystem that may keep it on this machine (hold.Lock.MachineLocal).
// The user did not choose the kernel lock, so tell them, once per
// acquisition; an explicit --protocol flock or HOLD_PROTOCOL=flock is their
// choice and is not second-guessed. The exit status does not change: the
// lock does exclude processes on this machine. A failure to find out says
// nothing, as before.
func warnMachineLocal(stderr *os.File, l *hold.Lock) {
	var herr *hold.Error
	if err := l.MachineLocal(); errors.Is(err, hold.ErrMachineLocal) && errors.As(err, &herr) {
		fmt.Fprintf(stderr, "hold: warning: %s: %v; if other machines (or other mounts) use this lock, pass --protocol dir (`hold doctor %s` checks)\n",
			herr.Path, herr.Err, filepath.Dir(herr.Path))
	}
}

// noticeWhileWaiting starts the waiting message; the returned function
// stops it and clears a message left on a terminal line. It returns only
// when nothing more will be printed.
func (r *Resolved) noticeWhileWaiting(stderr *os.File) (stop func()) {
	if stderr == nil {
		return func() {}
	}
	if !r.Tells(stderr) {
		return func() {}
	}
	terminal := isTerminal(stderr)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		refresh := logRefresh
		if terminal {
			refresh = terminalRefresh
		}
		timer := time.NewTimer(waitNoticeAfter)
		defer timer.Stop()
		shown := false
		for {
			select {
			case <-done:
				if shown && terminal {
					fmt.Fprint(stderr, "\r\033[K")
				}
				return
			case <-timer.C:
			}
			msg := r.waitingMessage(time.Since(start))
			if terminal {
				// One line, cut to the terminal's width: a wrapped line
				// could not be rewritten in place.
				if w := terminalWidth(stderr); w > 1 {
					if r := []rune(msg); len(r) >= w {
						msg = string(r[:w-2]) + "…"
					}
				}
				fmt.Fprint(stderr, "\r\033[K"+msg)
			} else {
				fmt.Fprintln(stderr, msg)
			}
			shown = true
			timer.Reset(refresh)
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// waitingMessage says what we wait for, how long so far (and at most,
// under -w) and who holds it, e.g. "hold: waiting (3s so far, up to 10s)
// for data.lock, held by pid 4242 (make) on host a1 for 12.4s, alive".
// The time is said as what it is: "waiting 1s" under -w 10 read like a
// limit.
func (r *Resolved) waitingMessage(waited time.Duration) string {
	so := RoundDuration(waited).String() + " so far"
	if r.Timeout > 0 {
		so += ", up to " + RoundDuration(r.Timeout).String()
	}
	st, err := r.Inspect()
	if err != nil {
		return fmt.Sprintf("hold: waiting (%s) for %s", so, r.Target)
	}
	msg := fmt.Sprintf("hold: waiting (%s) for %s", so, st.Path)
	switch {
	case st.State == hold.Free:
		if st.StoppedTurn != "" {
			// A fair waiter stopped at its turn (Ctrl-Z): say who.
			return msg + ", free, but the fair waiter whose turn it is does not take it: " + st.StoppedTurn
		}
		// Released a moment ago; the kernel is handing it over.
		return msg + ", just released"
	case st.Holder != nil:
		return msg + fmt.Sprintf(", %s by %s", st.State, st.Holder)
	}
	return msg + ", " + st.State.String()
}

// gaveUp rewords a wait that a signal ended: the error the library returns
// says "context canceled", Go's word, where the user pressed Ctrl-C.
func gaveUp(err error) error {
	var he *hold.Error
	if !errors.As(err, &he) || !errors.Is(he.Err, context.Canceled) {
		return err
	}
	c := *he
	c.Err = gaveUpError{}
	return &c
}

// gaveUpError is context.Canceled, said as the user sees it.
type gaveUpError struct{}

func (gaveUpError) Error() string { return "gave up waiting" }
func (gaveUpError) Unwrap() error { return context.Canceled }

// modeName names a lock mode in messages.
func modeName(shared bool) string {
	if shared {
		return "shared"
	}
	return "exclusive"
}

// RoundDuration shortens a duration for people: 1.2s, 250ms, 3m4s.
func RoundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second)
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// hintOf returns the hint of a hold error, or its message.
func hintOf(err error) string {
	var e *hold.Error
	if errors.As(err, &e) && e.Hint != "" {
		return e.Hint
	}
	return err.Error()
}
