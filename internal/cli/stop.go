package cli

import (
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"time"

	"github.com/hold-dev/hold/internal/errkind"
)

// defaultKillAfter is --kill-after's default: how long the command's
// processes have, once told to stop (SIGTERM), before hold kills them
// (SIGKILL). Short, because on a lost lock someone else may soon hold it.
const defaultKillAfter = 2 * time.Second

// reapAllowance is what hold needs on top of --kill-after to see every
// process of the command gone once SIGKILL is sent: the sweeps that kill
// what was forked meanwhile (tree.kill, at every look), the kernel's
// delivery, the reaping until the kernel says no child is left
// (tree.none), and hold's own exit. hold run asks the protocol
// for StopWithin(kill-after + reapAllowance).
const reapAllowance = 500 * time.Millisecond

// stopPoll is how often hold looks again, while it stops the command,
// whether any of its processes is left (and kills new ones once it has
// escalated to SIGKILL).
const stopPoll = 20 * time.Millisecond

// reapEvery is how often at most hold looks for dead orphans to reap
// (tree.reapOrphans) while the command runs: a look reads the process
// table, so a command whose children exit all the time must not make hold
// read it each time.
const reapEvery = time.Second

// stopWithin is the time hold run needs, from learning that its lock is
// lost, to have stopped every process of the command.
func stopWithin(killAfter time.Duration) time.Duration { return killAfter + reapAllowance }

// duration is a flag value: Go's duration syntax ("2s", "500ms") or plain
// seconds ("2", "0.5"), as timeout(1) takes them.
type duration time.Duration

// String returns the value in Go's syntax.
func (d *duration) String() string { return time.Duration(*d).String() }

// Set parses plain seconds or a Go duration; negative values are refused.
func (d *duration) Set(v string) error {
	var t time.Duration
	if f, err := strconv.ParseFloat(v, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		switch {
		case f != f:
			return errkind.Usagef("%q is not a number (say 2s, 500ms or a number of seconds)", v)
		case f < 0:
			return errkind.Usagef("the duration cannot be negative: %q", v)
		case f*float64(time.Second) >= float64(maxDuration):
			return errkind.Usagef("%s seconds is too long: at most %.0f (about 292 years)", v, math.Floor(maxDuration.Seconds()))
		}
		t = time.Duration(f * float64(time.Second))
	} else if t, err = time.ParseDuration(v); err != nil {
		if durationSyntax().MatchString(v) {
			// Well formed, so too large for time.Duration.
			return errkind.Usagef("%q is too long: at most %.0f seconds (about 292 years)", v, math.Floor(maxDuration.Seconds()))
		}
		return errkind.Usagef("%q is not a duration (say 2s, 500ms or a number of seconds)", v)
	}
	if t < 0 {
		return errkind.Usagef("the duration cannot be negative: %q", v)
	}
	*d = duration(t)
	return nil
}

// maxDuration is the longest duration a flag takes (time.Duration's).
const maxDuration = time.Duration(math.MaxInt64)

// durationSyntax is what time.ParseDuration accepts when the value fits
// (compiled only for an error's sake: hold starts as fast as flock(1)).
func durationSyntax() *regexp.Regexp {
	return regexp.MustCompile(`^[-+]?([0-9]*(\.[0-9]*)?(ns|us|µs|μs|ms|s|m|h))+$`)
}

// Type names the value in --help.
func (d *duration) Type() string { return "duration" }

// stopping is hold run's stopping of the whole command: every process it
// started is told to stop (SIGTERM, or the signal hold was sent), killed
// (SIGKILL) if any is left after the grace period, and killed again at
// every look until none is left, so that one forked meanwhile goes too.
// Whether any is left is the tree's none, which asks the kernel, never a
// count of what one look found. It lives on runEvents' goroutine.
type stopping struct {
	t         *tree
	name      string // the command, for messages
	grace     time.Duration
	killAt    <-chan time.Time // fires at the end of the grace period
	poll      *time.Ticker
	killed    bool // SIGKILL sent: send it again at every look
	hit       bool // SIGKILL found a process of the command to kill
	announced bool // the escalation was reported on stderr
}

// begin starts stopping the command through t with sig, unless it is
// already being stopped.
func (s *stopping) begin(t *tree, name string, grace time.Duration) {
	if s.poll != nil {
		return
	}
	s.t, s.name, s.grace = t, name, grace
	s.killAt = time.After(grace)
	s.poll = time.NewTicker(stopPoll)
}

// active reports whether the command is being stopped.
func (s *stopping) active() bool { return s.poll != nil }

// ticks is the channel of the next look, nil when not stopping.
func (s *stopping) ticks() <-chan time.Time {
	if s.poll == nil {
		return nil
	}
	return s.poll.C
}

// kill escalates to SIGKILL now (the grace ended, or Ctrl-C came twice).
func (s *stopping) kill() {
	s.killAt = nil
	s.killed = true
	s.sweep()
}

// sweep sends SIGKILL to every process of the command, and says so the
// first time it finds any.
func (s *stopping) sweep() {
	n := s.t.kill()
	if n == 0 {
		return
	}
	s.hit = true
	if !s.announced {
		s.announced = true
		if s.grace == 0 {
			// Ctrl-C twice: nothing was given time, and the kill was
			// announced already.
			fmt.Fprintf(os.Stderr, "hold run: sent SIGKILL to %d process(es) of %s\n", n, s.name)
		} else {
			fmt.Fprintf(os.Stderr, "hold run: %d process(es) of %s still running %s after SIGTERM; sending SIGKILL\n", n, s.name, s.grace)
		}
	}
}

// look is one look at what is left, after the direct child has been
// reaped or not (childGone): once SIGKILL has been sent, one more sweep.
// It reports whether every process is gone.
func (s *stopping) look(childGone bool) bool {
	if s.killed {
		s.sweep()
	}
	return childGone && s.t.none()
}

// end stops the timers.
func (s *stopping) end() {
	if s.poll != nil {
		s.poll.Stop()
	}
}
