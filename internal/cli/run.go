package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"time"

	"github.com/hold-dev/hold"
)

func init() {
	register(&command{
		name:    "run",
		summary: "run a command while holding the lock on TARGET (like flock(1))",
		usage:   "run [flags] TARGET -- COMMAND [ARGS...]\nrun [flags] TARGET -c 'shell command'",
		help:    runHelp + childLifeHelp,
		run:     runRun,
	})
}

const runHelp = `
The lock path is TARGET.lock (or --lock-file, or --name). The command runs
with the lock held, with HOLD_TARGET, HOLD_LOCK_FILE and HOLD_TOKEN (the
fencing token) in its environment, and the lock is released when it exits,
not before. -c runs the string with /bin/sh -c (cmd /C on Windows). Flags go
before TARGET; everything after it belongs to the command.

Signals: SIGINT, SIGTERM and SIGHUP are passed on to the command, and hold
exits only after the command has, with its status (128+N if a signal N
killed it). A second SIGINT within 2 seconds kills the command (Ctrl-C
twice). Ctrl-C on a terminal already reaches the command directly, so hold
does not send it a second copy.

Lock lifetime:
  kernel locks (--protocol flock, the default): the command inherits the
  lock's file descriptor (as fd 3, named by HOLD_LOCK_FD), as with flock(1).
  If hold itself is killed (SIGKILL, OOM), the lock stays held until the
  command exits, so the command never runs unprotected. The flip side:
  a background process (daemon) the command starts inherits the descriptor
  too. When the command exits normally hold unlocks the descriptor, which
  frees the lock for every process sharing it, daemons included; but if
  hold was killed, such a daemon keeps the lock until it exits.
  -o/--close does not pass the descriptor: killing hold then frees the lock
  at once while the command may still run.
`

// kernelLockCheck is how often `hold run` checks that a kernel lock's file
// is still the one it locked: within about this long of the file being
// removed or replaced, the command is told (SIGTERM) and hold exits 65.
const kernelLockCheck = time.Second

// doubleInterruptWindow is how soon a second SIGINT must follow the first
// for hold to kill the command outright.
const doubleInterruptWindow = 2 * time.Second

func runRun(args []string) int {
	fs := newFlagSet("run", false)
	var lf lockFlags
	lf.addTo(fs)
	closeFD := fs.BoolP("close", "o", false, "do not pass the lock's descriptor to the command (see Lock lifetime)")
	shell := fs.StringP("command", "c", "", "run `'COMMAND'` with the shell instead of COMMAND [ARGS...]")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	target, argv, err := splitRunArgs(fs.Args(), fs.ArgsLenAtDash(), *shell, fs.Changed("command"))
	if err != nil {
		return fail("run", err, lf.conflictExit)
	}
	if _, served := schemes[addressScheme(target)]; served {
		warmUp()
	}
	spec, err := lf.resolve(target)
	if err != nil {
		return fail("run", err, lf.conflictExit)
	}
	defer spec.close()

	// Catch signals from now on, so that one arriving between acquiring
	// and starting the command is not lost: it is forwarded at start.
	sigs, stopSignals := notifySignals()
	defer stopSignals()

	ctx, stopWait := interruptible(context.Background())
	l, err := spec.acquire(ctx, os.Stderr)
	interrupted := context.Cause(ctx)
	stopWait()
	if err != nil {
		return fail("run", err, spec.conflictExit)
	}
	var sig *signalError
	if errors.As(interrupted, &sig) {
		// Interrupted just as the lock came: do not start the command.
		l.Release()
		return fail("run", sig, spec.conflictExit)
	}
	code, err := runLocked(l, spec, argv, *closeFD, sigs)
	if rerr := l.Release(); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return fail("run", err, spec.conflictExit)
	}
	return code
}

// splitRunArgs finds TARGET and the command in what follows the flags.
// Accepted, as with flock(1):
//
//	TARGET -- COMMAND [ARGS...]
//	TARGET COMMAND [ARGS...]
//	TARGET -c 'shell command'   (or -c before TARGET)
//	-- COMMAND [ARGS...]        (no TARGET: with --name or --lock-file)
func splitRunArgs(rest []string, argsBeforeDash int, shell string, shellSet bool) (target string, argv []string, err error) {
	if argsBeforeDash == 0 {
		// "--" came before any positional argument: no TARGET.
		target = ""
	} else {
		if len(rest) == 0 && shellSet && shell != "" {
			// `hold run --lock-file F -c 'cmd'`, as `flock F -c 'cmd'`:
			// no TARGET (resolve says so if --lock-file or --name is
			// missing too).
			return "", shellCommand(shell), nil
		}
		if len(rest) == 0 {
			return "", nil, usagef("missing TARGET and COMMAND: hold run [flags] TARGET -- COMMAND [ARGS...]")
		}
		target, rest = rest[0], rest[1:]
		if len(rest) > 0 && rest[0] == "--" {
			rest = rest[1:]
		} else if len(rest) > 0 && (rest[0] == "-c" || rest[0] == "--command") {
			if shellSet {
				return "", nil, usagef("-c given twice")
			}
			if len(rest) != 2 {
				return "", nil, usagef("-c takes exactly one argument, the shell command (quote it)")
			}
			shell, shellSet, rest = rest[1], true, nil
		}
	}
	if shellSet {
		if len(rest) > 0 {
			return "", nil, usagef("give either -c 'shell command' or -- COMMAND [ARGS...], not both")
		}
		if shell == "" {
			return "", nil, usagef("-c needs a non-empty shell command")
		}
		return target, shellCommand(shell), nil
	}
	if len(rest) == 0 {
		return "", nil, usagef("missing COMMAND: hold run [flags] TARGET -- COMMAND [ARGS...] or TARGET -c 'shell command'")
	}
	return target, rest, nil
}

// shellCommand is the argv that runs s with the system shell. It is
// /bin/sh rather than $SHELL (which flock(1) uses) so that a script means
// the same for every user.
func shellCommand(s string) []string {
	if runtime.GOOS == "windows" {
		return []string{"cmd", "/C", s}
	}
	return []string{"/bin/sh", "-c", s}
}

// runLocked runs argv while l is held and returns its exit status. It
// forwards signals, kills the command on a double interrupt, and returns
// only after the command has exited.
func runLocked(l *hold.Lock, spec *lockSpec, argv []string, closeFD bool, sigs <-chan os.Signal) (int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(),
		"HOLD_TARGET="+spec.label,
		"HOLD_LOCK_FILE="+l.Path(),
		"HOLD_TOKEN="+strconv.FormatUint(l.Token(), 10),
	)
	inherits := passLock(cmd, l, closeFD)
	if inherits {
		cmd.Env = append(cmd.Env, "HOLD_LOCK_FD=3")
	} else {
		tieChildToParent(cmd)
	}

	exited, err := startLocked(cmd)
	if err != nil {
		return 0, &execError{cmd: argv[0], err: err}
	}
	if spec.verbose {
		fmt.Fprintf(os.Stderr, "hold: running %s (pid %d) with %s held\n", argv[0], cmd.Process.Pid, l.Path())
	}

	var (
		lastInterrupt time.Time
		lostErr       error
		lost          = l.Lost()
		lostWhy       string
		checks        <-chan time.Time
	)
	if l.File() != nil {
		// A kernel lock stays held while its descriptor is open, but it
		// guards nothing once its file is removed (rm, a temp cleaner) or
		// replaced: newcomers lock the new file. The other protocols
		// watch their locks themselves; this one is asked (one stat of
		// the path), only now that the command runs, so the check costs
		// its start nothing.
		tick := time.NewTicker(kernelLockCheck)
		defer tick.Stop()
		checks = tick.C
	}
	for {
		select {
		case <-checks:
			if err := l.Check(); errors.Is(err, hold.ErrLost) {
				// Check closed lost: the case below acts on it.
				var he *hold.Error
				if errors.As(err, &he) && he.Hint != "" {
					lostWhy = " (" + he.Hint + ")"
				}
				checks = nil
			}
		case err := <-exited:
			if lostErr != nil {
				return 0, lostErr
			}
			if cmd.ProcessState == nil {
				return 0, &execError{cmd: argv[0], err: err}
			}
			return exitStatusOf(cmd.ProcessState), nil
		case sig := <-sigs:
			if isInterrupt(sig) {
				now := time.Now()
				if !lastInterrupt.IsZero() && now.Sub(lastInterrupt) < doubleInterruptWindow {
					fmt.Fprintf(os.Stderr, "hold: second interrupt, killing %s (pid %d)\n", argv[0], cmd.Process.Pid)
					cmd.Process.Kill()
					continue
				}
				lastInterrupt = now
				if terminalSignalsOurGroup() {
					// The terminal sent it to our whole process group,
					// the command included.
					continue
				}
			}
			cmd.Process.Signal(sig)
		case <-lost:
			lost = nil
			lostErr = &hold.Error{Op: "run", Path: l.Path(), Err: hold.ErrLost,
				Hint: "the command was no longer protected; hold sent it SIGTERM"}
			// Say so now, while the command may still run for a while;
			// the full error follows when it has exited.
			fmt.Fprintf(os.Stderr, "hold run: lock %s lost%s; sending SIGTERM to %s (pid %d)\n", l.Path(), lostWhy, argv[0], cmd.Process.Pid)
			terminate(cmd.Process)
		}
	}
}

// startLocked starts cmd and returns a channel that receives cmd.Wait's
// result. The command is started and waited for on one goroutine locked to
// its OS thread, and that thread is never handed back: on Linux the
// parent-death signal set by tieChildToParent fires when the thread that
// forked the child exits, not when the process does, and the Go runtime
// may retire idle threads. Keeping the thread for the child's whole life
// makes "parent died" mean "hold died". The goroutine then ends still
// locked, so the runtime discards the thread only after the child has been
// reaped.
func startLocked(cmd *exec.Cmd) (<-chan error, error) {
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}
