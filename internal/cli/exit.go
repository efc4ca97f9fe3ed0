package cli

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/flock"
)

// Exit statuses. 1 is flock(1)'s "busy or timed out"; the rest are the BSD
// sysexits codes that docs/cli.md lists under "Exit status" (and
// docs/architecture.md names this file as their one home), so scripts can
// tell a lock that is merely busy from a lock that could not be used at all.
const (
	exitConflict     = 1  // the lock is held (-n), the wait timed out (-w) or gave up; -E changes it
	exitUsage        = 64 // EX_USAGE: bad flags or arguments
	exitLockError    = 65 // EX_DATAERR: the lock could not be used (unsupported filesystem, lost, ...)
	exitCannotOpen   = 66 // EX_NOINPUT: the lock file cannot be opened or is not hold's (missing directory, not a regular file, data at the lock path, no permission)
	exitExecFailed   = 69 // EX_UNAVAILABLE: the command could not be started
	exitDeadlock     = 70 // EX_SOFTWARE: the wait could never end (the lock is held by an ancestor that waits for this process)
	exitOSError      = 71 // EX_OSERR: another operating-system error
	exitCannotCreate = 73 // EX_CANTCREAT: read-only or full filesystem
	exitSignalBase   = 128
	// exitKilled is hold run's status when hold had to kill (SIGKILL)
	// some process of the command: 128+9, as a shell reports a process
	// SIGKILL ended, whatever status the command's first process had.
	exitKilled = exitSignalBase + 9
)

// exitEmptyOutput is hold update's FILTER that printed nothing without
// --allow-empty: FILE is left as it was, and the way on is another
// command line (--allow-empty, or a filter that prints what to keep),
// never a retry, as with every usage error.
const exitEmptyOutput = exitUsage

// exitStatusFree is hold status's answer when some TARGET is free: 0 is
// "held", as a query command's 0 is "yes" (systemctl is-active, pgrep).
const exitStatusFree = 1

// exitUnavailable is a lock server (etcd, PostgreSQL) that could not be
// reached: EX_UNAVAILABLE, which also says a command could not start.
const exitUnavailable = exitExecFailed

// exitStatuses is the exit status table: `hold help` and the man page
// print each status with its text in full (exitCodeHelp), and a
// command's first screen of --help its brief (briefExitStatuses).
var exitStatuses = []struct {
	code, brief string
	// text is the full description, wrapped at 80 columns after the
	// code's column.
	text string
}{
	{"0..255", "the command's own status", `the command's own status (hold run); 128+N if it was killed by signal N`},
	{"137", "hold had to SIGKILL some of it", `hold run had to kill (SIGKILL) some process of the command: it still
ran --kill-after after SIGTERM, or Ctrl-C came twice (a lost lock
is 65 all the same)`},
	{"1", "busy (-n), timed out (-w); see -E", `the lock is busy (-n), the wait timed out (-w), or the wait gave up
without the lock (its place in line went away); set another with -E N`},
	{"0/1", "hold status: held / free", `hold status: 0 when every TARGET is held, 1 when some TARGET is free
(or stale)`},
	{"64", "usage error", `usage error: bad flag or argument; also hold update's FILTER
printed nothing, without --allow-empty (FILE is left as it was)`},
	{"65", "the lock is unusable, or lost", `the lock could not be used (unsupported filesystem, clock skew), or
was lost while held`},
	{"66", "the lock path cannot be used", `the lock path, or the file update or append changes, cannot be used:
missing directory, not a regular file, no permission, or something
hold did not create (data, another tool's file, a named-lock
directory another user made); hold status of a path in a
directory that does not exist`},
	{"69", "command not started; no server", `the command could not be started, or a lock server (etcd,
PostgreSQL) could not be reached`},
	{"70", "deadlock with an ancestor", `deadlock: the lock is held by an ancestor that waits for this
process (hold run T -- hold run T ...); the message names it`},
	{"71", "other operating-system error", `other operating-system error`},
	{"73", "read-only or full filesystem", `read-only or full filesystem`},
	{"128+N", "signal N while waiting", `interrupted by signal N while waiting`},
}

// exitCodeHelp is the exit status table printed by `hold help`.
var exitCodeHelp = func() string {
	var b strings.Builder
	b.WriteString("\nExit status:\n")
	for _, e := range exitStatuses {
		for i, line := range strings.Split(e.text, "\n") {
			code := e.code
			if i > 0 {
				code = ""
			}
			fmt.Fprintf(&b, "  %-7s %s\n", code, line)
		}
	}
	return b.String()
}()

// briefExitStatuses is the exit status table in two columns of briefs,
// for a command's first screen of --help.
func briefExitStatuses() string {
	var b strings.Builder
	b.WriteString("Exit status:\n")
	half := (len(exitStatuses) + 1) / 2
	for i := range half {
		left := exitStatuses[i]
		fmt.Fprintf(&b, "  %-6s %-34s", left.code, left.brief)
		if j := i + half; j < len(exitStatuses) {
			fmt.Fprintf(&b, " %-6s %s", exitStatuses[j].code, exitStatuses[j].brief)
		}
		b.WriteString("\n")
	}
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

// usagef returns a usage error (exit 64).
func usagef(format string, args ...any) error { return errkind.Usagef(format, args...) }

// exitCodes maps the kinds of an error to hold's exit status: the first
// row whose kinds the error has decides. Busy, timed out and gave up
// have the caller's status (-E), see exitCode: each is a wait that ended
// without the lock, which exit 65 (a lock lost while held) is not.
var exitCodes = []struct {
	kinds errkind.Kinds
	code  int
}{
	{errkind.Usage, exitUsage},
	{errkind.Deadlock, exitDeadlock},
	{errkind.Busy | errkind.Timeout | errkind.GaveUp, -1},
	{errkind.Exec, exitExecFailed},
	{errkind.ReadOnly | errkind.Full, exitCannotCreate},
	// hold update and append: a target that is not a regular file (a
	// directory, a FIFO, a device, a socket) is one case, with one
	// status, whichever check found it.
	{errkind.NotRegular | errkind.Foreign | errkind.NotExist | errkind.Permission | errkind.FileNotRegular | errkind.IsDir, exitCannotOpen},
	{errkind.Unsupported | errkind.Lost, exitLockError},
	// A lock server that cannot be reached is the service's failure, not
	// the lock's: EX_UNAVAILABLE. (A held lock lost that way is Lost,
	// above.)
	{errkind.Unavailable, exitUnavailable},
	{errkind.Canceled, exitSignalBase + 2},
	{errkind.Errno, exitOSError},
}

// exitCode is the one mapping from an error to hold's exit status.
// conflict is the status for busy and timed out (1 unless -E).
func exitCode(err error, conflict int) int {
	if err == nil {
		return 0
	}
	kinds := errkind.Of(err)
	if kinds&errkind.Signal != 0 {
		var sig *errkind.SignalError
		errors.As(err, &sig)
		if n, ok := sig.Sig.(syscall.Signal); ok {
			return exitSignalBase + int(n)
		}
		return exitSignalBase + 2
	}
	for _, row := range exitCodes {
		if kinds&row.kinds != 0 {
			if row.code < 0 {
				return conflict
			}
			return row.code
		}
	}
	return exitLockError
}

// quietConflict says that a busy lock or a timed-out wait is told by the
// exit status alone: stderr is not a terminal (cron, a pipe) and
// --verbose was not given, or -q was (see lockspec.Resolved.Tells).
// flock(1) says nothing there, and a cron job's every busy minute would
// otherwise be a mail. lockFlags.resolve sets it.
var quietConflict bool

// fail reports err on stderr as "hold CMD: ..." and returns its exit
// status. Messages from hold's errors already name the lock path, the
// holder and a hint.
func fail(cmd string, err error, conflict int) int {
	code := exitCode(err, conflict)
	if quietConflict && errkind.Of(err)&(errkind.Busy|errkind.Timeout) != 0 && errkind.Of(err)&errkind.Signal == 0 {
		return code
	}
	if cmd == "run" || cmd == "update" || cmd == "append" {
		// The library names every front end's way to make a missing
		// directory; this one's is the command's own flag.
		flock.HintMakeDirs(err, "hold "+cmd+" --make-dirs")
	}
	fmt.Fprintf(os.Stderr, "hold %s: %v\n", cmd, err)
	if code == exitUsage {
		var usage *errkind.UsageError
		if errors.As(err, &usage) {
			fmt.Fprintf(os.Stderr, "Run 'hold %s --help' for usage.\n", cmd)
		}
	}
	return code
}
