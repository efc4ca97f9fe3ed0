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
// starts catching on a goroutine of its own, which then runs also (if not
// nil) and sends its error on ready. The first signal.Notify of a process
// starts the runtime's signal-mask thread and hands it each signal in
// turn, a few hundred microseconds of thread hand-offs that `hold run`
// would otherwise spend before it even tries the lock; this way they
// overlap with it, on the other core.
//
// A signal that comes before ready has its default effect: hold dies, as
// it could by SIGKILL at any moment, which every protocol survives (a
// kernel lock is freed with its descriptor, a waiter's place is judged
// abandoned). So a caller needs to receive from ready only before
// something a signal must reach: the command it runs. stop waits for the
// goroutine, then restores the default behaviour.
func catchSignals(also func() error) (sigs <-chan os.Signal, ready <-chan error, stop func()) {
	ch := make(chan os.Signal, 8)
	result := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		signal.Notify(ch, forwardedSignals...)
		var err error
		if also != nil {
			err = also()
		}
		result <- err
	}()
	return ch, result, func() {
		<-done
		signal.Stop(ch)
	}
}
