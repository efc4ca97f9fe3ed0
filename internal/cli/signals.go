package cli

import (
	"os"
	"os/signal"
)

// notifySignals starts catching forwardedSignals; stop restores the
// default behaviour.
func notifySignals() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 8)
	signal.Notify(ch, forwardedSignals...)
	return ch, func() { signal.Stop(ch) }
}

// catchSignals is notifySignals without the wait: it returns at once and
// starts catching on a goroutine of its own, closing ready when the
// signals are caught. The first signal.Notify of a process starts the
// runtime's signal-mask thread and hands it each signal in turn, a few
// hundred microseconds of thread hand-offs that `hold run` would otherwise
// spend before it even tries the lock; this way they overlap with it, on
// the other core.
//
// A signal that comes before ready is closed has its default effect:
// hold dies, as it could by SIGKILL at any moment, which every protocol
// survives (a kernel lock is freed with its descriptor, a waiter's place
// is judged abandoned). So a caller needs to wait for ready only before
// something a signal must reach: the command it runs. stop waits for
// ready, then restores the default behaviour.
func catchSignals() (sigs <-chan os.Signal, ready <-chan struct{}, stop func()) {
	ch := make(chan os.Signal, 8)
	done := make(chan struct{})
	go func() {
		signal.Notify(ch, forwardedSignals...)
		close(done)
	}()
	return ch, done, func() {
		<-done
		signal.Stop(ch)
	}
}
