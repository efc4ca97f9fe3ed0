package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/internal/proc"
)

func init() {
	register(&command{
		name:    "run",
		summary: "run a command holding the lock TARGET.lock (as flock TARGET.lock, not flock TARGET)",
		usage:   "run [flags] TARGET -- COMMAND [ARGS...]\nrun [flags] TARGET -c 'shell command'\nrun [-s|-x|-u] [-n|-w SECONDS] [-E N] FD",
		help:    runHelp + childLifeHelp + "\n" + treeHelp + "\n" + runHelpMore,
		brief: []string{"nonblock", "wait", "shared", "exclusive", "unlock", "conflict-exit-code", "close", "command", "no-fork", "verbose",
			"", "lock-file", "name", "protocol", "slots", "fair", "quiet", "kill-after"},
		run: runRun,
	})
}

const runHelp = `
The lock path is TARGET.lock, or --lock-file, or --name. A TARGET whose name
ends in .lock (yarn.lock, Cargo.lock) is locked itself too, after
TARGET.lock, writing nothing into it: so flock x.lock and hold run x.lock
exclude each other, and a command that saves x.lock by rename keeps the
lock. hold run F for another F locks F.lock, not F, which flock F locks: on
a terminal or with --verbose hold says when F itself is locked by another
process. The command runs with the lock held, with HOLD_TARGET,
HOLD_LOCK_FILE and HOLD_TOKEN (the fencing token) in its environment, and
the lock is released when it exits, not before. -c runs the string with
/bin/sh -c (cmd /C on Windows). Flags go before TARGET; everything after it
belongs to the command.

--slots N takes one of N slots of a semaphore instead: at most N commands
at once, waiters served in arrival order, each the first slot that is
free; HOLD_SLOT (0 to N-1) says which. Every holder must ask for the same
N while any slot is held (another N fails with exit 64). A plain lock of
TARGET waits until no slot is held. Slot K is the kernel lock file
TARGET.lock.slotK, which flock -s TARGET.lock flock TARGET.lock.slotK CMD
takes by hand.

Signals: SIGINT, SIGTERM and SIGHUP are passed on to every process of the
command, and hold exits only after the command has, with its status
(128+N if a signal N killed it). SIGTERM asks hold to stop: what is left
of the command --kill-after later is killed (SIGKILL). A second SIGINT
within 2 seconds kills the whole command (Ctrl-C twice). Ctrl-C on a
terminal already reaches the command directly, so hold does not send it a
second copy. When hold had to kill (SIGKILL) any process of the command,
it exits 137 (128+9), whatever status the command's first process left
(a shell that traps SIGTERM may exit 0 while its child had to be killed).

Lost lock: if the lock is lost while the command runs (its kernel lock
file removed or replaced, a lease or heartbeat that could not be renewed),
hold tells the command to stop (SIGTERM), kills what is left after
--kill-after (default 2s), and exits 65 once none of it runs. A lock that
can expire is declared lost early enough for all of that to end before
anyone else can take it.

Once it has begun to stop the command (SIGTERM, a lost lock, Ctrl-C
twice), hold exits, and lets go of its lock, only when nothing of the
command runs any more, however often its processes fork (see below for
how each system knows). A command that ends by itself is not stopped:
what it left running in the background is left alone.

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

// runHelpMore follows the indented "Lock lifetime" section, which
// childLifeHelp and treeHelp end (they differ by platform).
const runHelpMore = `
Messages: a busy lock (-n) or a timed-out wait (-w) is reported on stderr
only when stderr is a terminal; elsewhere (cron, a pipe, a log) hold says
nothing, as flock(1) does, and the exit status (1, or -E) tells. --verbose
reports it anyway; -q/--quiet never does, even on a terminal.

As flock(1) does, a lock file hold does not write its owner record into (the
script or data file named with --lock-file) is opened read-only, so a script
can lock itself:
  [ "${FLOCKER}" != "$0" ] && exec env FLOCKER="$0" hold run -n --lock-file "$0" -- "$0" "$@" || :
A directory named with --lock-file is locked as flock(1) locks it, unless it
is a portable-protocol lock (a directory holding owner.json, or an empty
X.lock, as proper-lockfile makes): take that one with --protocol dir.

Descriptor form (flock FD): 'hold run [flags] FD', with a lone number and no
command, locks descriptor FD, which the shell opened, with one flock(2), as
flock(1) does, and exits: exec 9>>F; hold run -n 9 || exit 1, or ( hold run
-n 9 || exit 1; ... ) 9>>F. Open F with >>: 9>F empties it, and a hold lock
file emptied so starts its fencing tokens again from 1. The lock belongs to
the shell's open file and stays held until the shell closes FD or runs 'hold
run -u FD'. It takes -s, -x/-e, -u, -n, -w, -E, -q and --verbose. An
exclusive lock's owner record names the process that keeps FD (hold's
parent, the shell or subshell), not hold, which exits at once; -u leaves a
past record in its place, keeping the token. -w here tries again every few
milliseconds (up to 25ms apart) rather than sleeping in the kernel, so that
a lock granted after the deadline can never be left on the shell's
descriptor.

No fork: -F/--no-fork (flock -F) runs the command in hold's place (exec),
keeping the lock's descriptor, named by HOLD_LOCK_FD; the lock is released
when the command exits. Nothing is left to pass signals on or to watch the
lock file, and the owner record, which names the command's pid (hold's
pid), stays until the next holder rewrites it. Kernel lock only; not with
-o or --fair.

Not supported: flock(1)'s --fcntl, --start and --length (byte-range locks);
-c runs /bin/sh, not $SHELL.
`

// doubleInterruptWindow is how soon a second SIGINT must follow the first
// for hold to kill the command outright.
const doubleInterruptWindow = 2 * time.Second

// interruptNoticeAfter is how long after a first SIGINT hold says that
// the command still runs: long enough for a command that obeys it to be
// gone, so that only one that does not is talked about.
const interruptNoticeAfter = 500 * time.Millisecond

func runRun(args []string) int {
	fs := newFlagSet("run", false)
	var lf lockFlags
	lf.addTo(fs)
	closeFD := fs.BoolP("close", "o", false, "do not pass the lock's descriptor to the command (see Lock lifetime)")
	shell := fs.StringP("command", "c", "", "run `'COMMAND'` with the shell instead of COMMAND [ARGS...]")
	noFork := fs.BoolP("no-fork", "F", false, "exec the command in hold's place, as flock -F (kernel lock only)")
	unlock := fs.BoolP("unlock", "u", false, "with FD: drop the lock of descriptor FD (as flock -u)")
	killAfter := duration(defaultKillAfter)
	fs.Var(&killAfter, "kill-after", "on a lost lock or SIGTERM, SIGKILL what is left of the command `DURATION` after SIGTERM (2s, 500ms, or seconds)")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fd, ok := descriptorForm(fs.Args(), fs.ArgsLenAtDash(), fs.Changed("command")); ok {
		return runDescriptor(fd, &lf, fs, *unlock)
	}
	target, argv, err := splitRunArgs(fs.Args(), fs.ArgsLenAtDash(), *shell, fs.Changed("command"))
	if err == nil {
		err = checkRunForm(&lf, *noFork, *closeFD, *unlock)
	}
	if err != nil {
		return fail("run", err, lf.conflictExit)
	}
	if lockspec.Serves(lockspec.AddressScheme(target)) {
		warmUp()
	}
	spec, err := lf.resolve(target)
	if err == nil && spec.Local() {
		// Before the lock file is made (a network lock leaves none).
		err = findCommand("run", "", argv)
	}
	if err != nil {
		if spec != nil {
			spec.Close()
		}
		return fail("run", err, lf.conflictExit)
	}
	quietAbout(spec)
	defer spec.Close()
	// A lock that can expire must say it is lost early enough for the
	// whole stop (SIGTERM, the grace, SIGKILL, the reaping) to be over
	// before anyone else can take it.
	spec.Opts = append(spec.Opts, hold.StopWithin(stopWithin(time.Duration(killAfter))))
	// Nothing of this process can release a lock while it waits: its
	// wait keeps whatever the process holds (the deadlock search's word,
	// and the self check's).
	spec.Opts = append(spec.Opts, hold.FailIfHeldHere())

	// Catch signals from now on: one that comes while waiting ends the
	// wait, and one that comes between acquiring and starting the command
	// is not lost but passed on at start. One goroutine does both (see
	// runEvents). Catching starts in the background (see catchSignals)
	// and is complete before the command starts.
	// Watching the lock while the command runs arms a timer, and the first
	// timer makes the runtime's poller, which must be made before the
	// lock's files take the last descriptors: see proc.ReadyForLock.
	if err := proc.ReadyForLock("run", spec.Label); err != nil {
		return fail("run", err, spec.ConflictExit)
	}
	sigs, signalsCaught, stopSignals := catchSignals()
	defer stopSignals()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	r := startRunEvents(sigs, cancel, time.Duration(killAfter))
	defer r.stop()

	l, err := spec.Acquire(ctx, os.Stderr)
	interrupted := context.Cause(ctx)
	if err != nil {
		return fail("run", err, spec.ConflictExit)
	}
	var sig *errkind.SignalError
	if errors.As(interrupted, &sig) {
		// Interrupted just as the lock came: do not start the command.
		l.Release()
		return fail("run", sig, spec.ConflictExit)
	}
	<-signalsCaught
	if *noFork {
		// Returns only if the command could not be started.
		err := execLocked(l, spec, argv)
		l.Release()
		return fail("run", err, spec.ConflictExit)
	}
	code, err := runLocked(l, spec, argv, *closeFD, r)
	if rerr := l.Release(); rerr != nil && err == nil {
		err = rerr
	}
	if err != nil {
		return fail("run", err, spec.ConflictExit)
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

// runLocked runs argv while l is held and returns its exit status, after
// the command has exited. r passes signals on to it while it runs.
func runLocked(l *hold.Lock, spec *lockspec.Resolved, argv []string, closeFD bool, r *runEvents) (int, error) {
	cmd := commandFor(argv)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = commandEnv(l, spec)
	if passLock(cmd, l, closeFD) {
		cmd.Env = append(cmd.Env, "HOLD_LOCK_FD=3")
	} else {
		tieChildToParent(cmd)
		// On Linux the parent-death signal fires when the thread that
		// forked the child exits, not when the process does, and the Go
		// runtime may retire a thread no goroutine is locked to. Keeping
		// this thread until the child has been reaped makes "parent died"
		// mean "hold died".
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	t := newTree(cmd)
	if err := cmd.Start(); err != nil {
		return 0, &errkind.ExecError{Cmd: argv[0], Err: err}
	}
	t.started(cmd.Process)
	if spec.Verbose {
		fmt.Fprintf(os.Stderr, "hold: running %s (pid %d) with %s held\n", argv[0], cmd.Process.Pid, l.Path())
	}
	r.started(cmd, l, t)
	err := cmd.Wait()
	if lostErr := r.stop(); lostErr != nil {
		return 0, lostErr
	}
	if cmd.ProcessState == nil {
		return 0, &errkind.ExecError{Cmd: argv[0], Err: err}
	}
	if r.killed {
		// hold had to kill some of the command: its own status (0, say,
		// from a shell that trapped SIGTERM while its child ignored it)
		// would tell that it ended by itself.
		return exitKilled, nil
	}
	return exitStatusOf(cmd.ProcessState), nil
}

// commandEnv is the environment of the command run with l held.
func commandEnv(l *hold.Lock, spec *lockspec.Resolved) []string {
	return append(os.Environ(),
		"HOLD_TARGET="+spec.Label,
		"HOLD_LOCK_FILE="+l.Path(),
		"HOLD_TOKEN="+strconv.FormatUint(l.Token(), 10),
		"HOLD_SLOT="+strconv.Itoa(l.Slot()),
	)
}

// runEvents is hold run's one goroutine for events: it ends the wait for the
// lock on a signal, passes signals on to the command once it runs (those
// that came before it started, too), kills the command on a double
// interrupt, and stops the whole command if the lock is lost or hold is
// asked to stop (see stopping). The command's exit is waited for by
// runLocked itself.
type runEvents struct {
	sigs      <-chan os.Signal
	cancel    context.CancelCauseFunc
	killAfter time.Duration
	start     chan started
	done      chan struct{}
	finished  chan struct{}
	stopped   bool
	lostErr   error // written by loop, read after finished is closed
	killed    bool  // hold killed (SIGKILL) a process of the command; as lostErr
}

// started is the running command, the lock it runs under and its
// processes.
type started struct {
	cmd *exec.Cmd
	l   *hold.Lock
	t   *tree
}

func startRunEvents(sigs <-chan os.Signal, cancel context.CancelCauseFunc, killAfter time.Duration) *runEvents {
	r := &runEvents{
		sigs:      sigs,
		cancel:    cancel,
		killAfter: killAfter,
		start:     make(chan started, 1),
		done:      make(chan struct{}),
		finished:  make(chan struct{}),
	}
	go r.loop()
	return r
}

// started tells the relay that cmd runs with l held, as the processes t.
func (r *runEvents) started(cmd *exec.Cmd, l *hold.Lock, t *tree) {
	r.start <- started{cmd, l, t}
}

// stop is called once the command has exited (or never started). If the
// command is being stopped, it waits until none of its processes is left
// (the kernel says so: see tree.none); the lock is released only after
// that. It returns the error that says the lock was lost while the
// command ran, if it was; r.killed then says whether hold had to kill
// some of the command. Calling it again does nothing.
func (r *runEvents) stop() error {
	if !r.stopped {
		r.stopped = true
		close(r.done)
		<-r.finished
	}
	return r.lostErr
}

func (r *runEvents) loop() {
	defer close(r.finished)
	var (
		run           started
		pending       []os.Signal
		lastInterrupt time.Time
		lost          <-chan struct{}
		stop          stopping
		done          = r.done
		childGone     bool
		exits         <-chan os.Signal
		reapAt        <-chan time.Time
		// intNotice fires interruptNoticeAfter a first interrupt, to
		// say that the command still runs and how to kill it.
		intNotice <-chan time.Time
	)
	defer stop.end()
	defer func() { r.killed = stop.hit }()
	for {
		select {
		case sig := <-r.sigs:
			if run.cmd == nil {
				// While waiting this ends the wait; once the lock is
				// held, runRun sees it and does not start the command,
				// unless it is already starting: then the command gets
				// the signal as soon as it runs.
				r.cancel(&errkind.SignalError{Sig: sig})
				pending = append(pending, sig)
				continue
			}
			if childGone {
				// The command has exited; what is left of it is being
				// stopped already.
				continue
			}
			prev := lastInterrupt
			lastInterrupt = r.forward(run, sig, lastInterrupt, &stop)
			if lastInterrupt != prev {
				intNotice = time.After(interruptNoticeAfter)
			}
		case <-intNotice:
			intNotice = nil
			if !childGone && !stop.active() {
				// A command that ignores SIGINT (or takes its time)
				// would otherwise leave the user with no word at all.
				fmt.Fprintf(os.Stderr, "hold: %s (pid %d) is still running after the interrupt; interrupt again within %s (Ctrl-C) to kill it and every process it started\n",
					run.cmd.Args[0], run.cmd.Process.Pid, doubleInterruptWindow-interruptNoticeAfter)
			}
		case run = <-r.start:
			defer run.t.close()
			exits = run.t.exits()
			lost = run.l.Lost()
			for _, sig := range pending {
				// The command did not exist when these were sent, so
				// nothing else delivered them to it.
				if isInterrupt(sig) {
					lastInterrupt = time.Now()
				}
				if isTerminate(sig) {
					r.terminate(run, sig, &stop)
				} else {
					run.t.terminate(sig)
				}
			}
			pending = nil
		case <-lost:
			// The library watches every protocol's lock, a kernel
			// lock's file included, and closes Lost when it finds the
			// lock gone; watching began with the Lost call above, once
			// the command runs, so its start paid nothing for it.
			lost = nil
			l := run.l
			// Stop first: asking the protocol why below may take a
			// moment (its lock may be stuck in a hung filesystem).
			r.terminate(run, syscall.SIGTERM, &stop)
			// The protocol's error says why (a heartbeat, a lease, the
			// lock file removed). A lost lock answers without a look.
			var lostWhy string
			var he *hold.Error
			if errors.As(l.Check(), &he) && he.Hint != "" {
				lostWhy = " (" + he.Hint + ")"
			}
			r.lostErr = &hold.Error{Op: "run", Path: l.Path(), Err: hold.ErrLost,
				Hint: fmt.Sprintf("the command was no longer protected; hold stopped it and every process it started (SIGTERM, then SIGKILL after %s)", r.killAfter)}
			// Say so now, while the command may still run for a while;
			// the full error follows when it has exited.
			fmt.Fprintf(os.Stderr, "hold run: lock %s lost%s; sent SIGTERM to %s (pid %d) and every process it started, SIGKILL after %s\n",
				l.Path(), lostWhy, run.cmd.Args[0], run.cmd.Process.Pid, r.killAfter)
		case <-exits:
			if reapAt == nil {
				reapAt = time.After(reapEvery)
			}
		case <-reapAt:
			reapAt = nil
			run.t.reapOrphans()
		case <-stop.killAt:
			stop.kill()
		case <-stop.ticks():
			if stop.look(childGone) {
				return
			}
		case <-done:
			done = nil
			childGone = true
			if !stop.active() || stop.look(true) {
				// A command that exited by itself leaves its background
				// processes alone, as before.
				return
			}
		}
	}
}

// forward passes sig on to the whole running command: SIGTERM stops it
// (see terminate); a second interrupt within doubleInterruptWindow of the
// one at lastInterrupt kills it; others reach every process of it. It
// returns the time of the last interrupt.
func (r *runEvents) forward(run started, sig os.Signal, lastInterrupt time.Time, stop *stopping) time.Time {
	if isTerminate(sig) {
		r.terminate(run, sig, stop)
		return lastInterrupt
	}
	if isInterrupt(sig) {
		now := time.Now()
		if !lastInterrupt.IsZero() && now.Sub(lastInterrupt) < doubleInterruptWindow {
			fmt.Fprintf(os.Stderr, "hold: second interrupt within %s: killing %s (pid %d) and every process it started (SIGKILL)\n", doubleInterruptWindow, run.cmd.Args[0], run.cmd.Process.Pid)
			stop.begin(run.t, run.cmd.Args[0], 0)
			stop.kill()
			return lastInterrupt
		}
		if terminalSignalsOurGroup() {
			// The terminal sent it to our whole process group, the
			// command included.
			return now
		}
		lastInterrupt = now
	}
	run.t.terminate(sig)
	return lastInterrupt
}

// terminate starts stopping the whole command: sig now to every process of
// it, SIGKILL to what is left after --kill-after.
func (r *runEvents) terminate(run started, sig os.Signal, stop *stopping) {
	run.t.terminate(sig)
	stop.begin(run.t, run.cmd.Args[0], r.killAfter)
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
