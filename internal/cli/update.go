package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/atomicfile"
	"github.com/hold-dev/hold/internal/errkind"
)

func init() {
	register(&command{
		name:    "update",
		summary: "rewrite FILE through a filter command under its lock, atomically",
		usage:   "update [flags] FILE -- FILTER [ARGS...]\nupdate [flags] FILE -c 'shell filter'",
		help:    updateHelp,
		run:     runUpdate,
	})
}

const updateHelp = `
Takes the lock FILE.lock (or --lock-file, --name), the same lock 'hold run
FILE' and 'hold append FILE' take; for a FILE whose name ends in .lock, also
FILE's own kernel lock (writing nothing into it), as they and flock(1) take
it, until the new FILE is in place. It runs FILTER with FILE's content on
stdin (empty if FILE does not exist, unless --must-exist), and replaces FILE
with what FILTER prints, atomically: a temp file beside FILE is written,
synced, given FILE's permission bits and renamed over it, and the directory
is synced. Readers see the old content or the new, never a mix. If FILE is a
symlink, the file it points to is replaced and the link stays. Output equal
to the old content writes nothing. Example:

  hold update hooks.json -- jq '.hooks += ["x"]'
  hold update todo.txt -c 'sort -u'

FILE is left untouched, and nothing is written, when FILTER cannot start
(exit 69), exits non-zero (hold exits with the same status), is killed by a
signal N (128+N), or prints nothing: empty output is refused (exit 64)
unless --allow-empty, because a filter that fails silently would otherwise
wipe FILE. A missing FILE reads as empty input, and --allow-empty creates
nothing for it: create FILE first, or use a filter that prints something for
empty input (jq -n 'first(inputs) // {} | .a = 1'). FILTER's stderr is
passed through. SIGINT, SIGTERM or SIGHUP to hold while FILTER runs kill
FILTER (and its process group) and hold exits 128+N with FILE untouched;
FILTER never outlives hold (on Linux not even when hold is killed with
SIGKILL). A signal that arrives after FILTER has finished lets the short
write complete.

The new file gets everything FILE is besides its content: owner and group,
permission bits, extended attributes (ACLs, SELinux labels, user.*). What
it could not keep is refused, FILE untouched (exit 66): a FILE with other
hard links, which would keep the old content (--allow-split accepts that);
a FILE you do not own, or whose group you are not in, unless you are root,
since the new file would be yours (--allow-owner-change accepts that and
says so); an attribute you may not set. A symlink in a sticky
world-writable directory such as /tmp is followed only if it is yours or
the directory owner's. FILE and the filter's output are streamed, not held
in memory. Once the new file is in place, hold exits 0; a directory that
could not be synced after that is a warning on stderr.

Other exit statuses: 1 (or -E) when the lock is busy (-n) or the wait timed
out (-w); 66 when FILE cannot be opened or replaced for lack of permission;
73 when the disk is full or read-only; see 'hold help' for the rest.
`

// filterGrace is how long a filter whose output is done may keep its
// stdout open through a background child before hold stops waiting.
const filterGrace = 5 * time.Second

// filterError is a filter that ran and failed: its exit status becomes
// hold's.
type filterError struct {
	argv0  string
	status int
	// why says what happened in words: "exited with status 3", "was
	// killed by SIGSEGV", "printed nothing".
	why string
}

func (e *filterError) Error() string { return fmt.Sprintf("filter %s %s", e.argv0, e.why) }

// failFilter reports a failed filter and returns its status.
func failFilter(op, file string, fe *filterError) int {
	fmt.Fprintf(os.Stderr, "hold %s: %s: %v; %s left unchanged\n", op, file, fe, file)
	return fe.status
}

func runUpdate(args []string) int {
	fs := newFlagSet("update", false)
	var lf lockFlags
	lf.addTo(fs)
	fs = exclusiveOnly(fs, "update")
	allowEmpty := fs.Bool("allow-empty", false, "accept empty output from FILTER (empties FILE)")
	mustExist := fs.Bool("must-exist", false, "fail if FILE does not exist instead of starting from empty content")
	allowSplit := fs.Bool("allow-split", false, "replace FILE even if it has other hard links (they keep the old content)")
	allowOwnerChange := fs.Bool("allow-owner-change", false, "replace FILE even if the new file cannot keep its owner or group (it becomes yours)")
	shell := fs.StringP("command", "c", "", "run `'FILTER'` with the shell instead of FILTER [ARGS...], as hold run -c does")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	rest := fs.Args()
	if len(rest) == 0 || rest[0] == "--" {
		return fail("update", usagef("missing FILE: hold update [flags] FILE -- FILTER [ARGS...]"), lf.conflictExit)
	}
	file, argv, err := splitUpdateArgs(rest, *shell, fs.Changed("command"))
	if err != nil {
		return fail("update", err, lf.conflictExit)
	}
	if err := findCommand("update", file, argv); err != nil {
		return fail("update", err, lf.conflictExit)
	}

	// Catch signals from before the lock is taken to the end, so that one
	// arriving while FILTER runs reaches us and not the default handler.
	sigs, stopSignals := notifySignals()
	defer stopSignals()

	return guarded("update", &lf, file, func(l *hold.Lock) error {
		o := atomicfile.Options{
			MustExist:        *mustExist,
			AllowSplit:       *allowSplit,
			AllowOwnerChange: *allowOwnerChange,
			AllowEmpty:       *allowEmpty,
			Warn:             func(err error) { warn("update", err) },
		}
		err := atomicfile.UpdateStream(atomicfile.OS{}, file, o, func(old io.Reader, out io.Writer) error {
			if _, err := runFilter(l, file, argv, old, out, sigs, lf.verbose); err != nil {
				return err
			}
			select {
			case sig := <-sigs:
				return &errkind.SignalError{Sig: sig, Err: fmt.Errorf("%s left unchanged", file)}
			default:
			}
			return nil
		}, l.Check)
		var empty *atomicfile.EmptyError
		if errors.As(err, &empty) {
			return emptyOutput(file, argv, empty.Missing)
		}
		return err
	})
}

// splitUpdateArgs splits what follows update's flags into FILE and the
// filter's argv, as splitRunArgs does for hold run:
//
//	FILE -- FILTER [ARGS...]
//	FILE FILTER [ARGS...]
//	FILE -c 'shell filter'   (or -c before FILE)
func splitUpdateArgs(rest []string, shell string, shellSet bool) (file string, argv []string, err error) {
	file, argv = rest[0], rest[1:]
	if len(argv) > 0 && argv[0] == "--" {
		argv = argv[1:]
	} else if len(argv) > 0 && (argv[0] == "-c" || argv[0] == "--command") {
		if shellSet {
			return "", nil, usagef("-c given twice")
		}
		if len(argv) != 2 {
			return "", nil, usagef("-c takes exactly one argument, the shell filter (quote it)")
		}
		shell, shellSet, argv = argv[1], true, nil
	}
	if shellSet {
		if len(argv) > 0 {
			return "", nil, usagef("give either -c 'shell filter' or -- FILTER [ARGS...], not both")
		}
		if shell == "" {
			return "", nil, usagef("-c needs a non-empty shell filter")
		}
		return file, shellCommand(shell), nil
	}
	if len(argv) == 0 || argv[0] == "" {
		return "", nil, usagef("missing FILTER: hold update [flags] FILE -- FILTER [ARGS...] or FILE -c 'shell filter'")
	}
	return file, argv, nil
}

// emptyOutput is the refusal of a filter that printed nothing (the
// library's rule, atomicfile.ErrEmpty), in the command's words.
func emptyOutput(file string, argv []string, missing bool) *filterError {
	fe := &filterError{argv0: argv[0], status: exitEmptyOutput,
		why: "printed nothing (refusing to empty the file; use --allow-empty to empty it)"}
	if missing {
		// --allow-empty would write nothing here: empty content for a
		// missing file creates nothing.
		example := "a filter that prints something for empty input"
		if filepath.Base(argv[0]) == "jq" && len(argv) == 2 {
			example += fmt.Sprintf(" (jq -n 'first(inputs) // {} | %s')", argv[1])
		}
		fe.why = fmt.Sprintf("printed nothing for the empty input of a missing file: create %s first with the content to start from (such as echo '{}' > %s), or use %s", file, file, example)
	}
	return fe
}

// warn reports on stderr what a command that succeeded should say: a
// directory that could not be synced after the rename, an owner that
// changed.
func warn(op string, err error) {
	fmt.Fprintf(os.Stderr, "hold %s: warning: %v\n", op, err)
}

// countingWriter counts what the filter printed, and keeps the first
// error writing it (a full disk), which is the error to report rather
// than what the filter makes of its closed stdout.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// runFilter runs argv with in on stdin, writes its stdout to out and
// returns how many bytes it printed. in is FILE itself, opened for
// reading, which the filter gets as its stdin directly. out is the temp
// file, reached through a pipe that hold copies from, so that nothing the
// filter leaves running can write into the file once it is published. A
// signal on sigs kills the filter (with its process group) and returns a
// *errkind.SignalError; a filter that cannot start gives an *errkind.ExecError, one that
// fails a *filterError, and a failed write to out that write's error.
func runFilter(l *hold.Lock, file string, argv []string, in io.Reader, out io.Writer, sigs <-chan os.Signal, verbose bool) (int64, error) {
	cmd := commandFor(argv)
	cw := &countingWriter{w: out}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = in, cw, os.Stderr
	cmd.Env = append(os.Environ(),
		"HOLD_TARGET="+file,
		"HOLD_LOCK_FILE="+l.Path(),
		"HOLD_TOKEN="+strconv.FormatUint(l.Token(), 10),
	)
	cmd.WaitDelay = filterGrace
	ownGroup(cmd)
	tieChildToParent(cmd)

	// Started on a thread kept for the filter's life, so that the
	// parent-death signal (Linux) means "hold died"; see startLocked.
	exited, err := startLocked(cmd)
	if err != nil {
		return 0, &errkind.ExecError{Cmd: argv[0], Err: err}
	}
	if verbose {
		fmt.Fprintf(os.Stderr, "hold: running filter %s (pid %d) with %s held\n", argv[0], cmd.Process.Pid, l.Path())
	}
	select {
	case err := <-exited:
		if cmd.ProcessState == nil {
			return 0, &errkind.ExecError{Cmd: argv[0], Err: err}
		}
		if cw.err != nil {
			return 0, cw.err
		}
		if status := exitStatusOf(cmd.ProcessState); status != 0 {
			why := fmt.Sprintf("exited with status %d", status)
			if status > exitSignalBase && !cmd.ProcessState.Exited() {
				why = fmt.Sprintf("was killed (%s)", cmd.ProcessState)
			}
			return 0, &filterError{argv0: argv[0], status: status, why: why}
		}
		if err != nil { // exited 0, but its output could not be collected
			return 0, &filterError{argv0: argv[0], status: exitOSError, why: "output was not collected: " + err.Error()}
		}
		return cw.n, nil
	case sig := <-sigs:
		killGroup(cmd.Process)
		<-exited
		return 0, &errkind.SignalError{Sig: sig, Err: fmt.Errorf("filter %s (pid %d) killed; %s left unchanged", argv[0], cmd.Process.Pid, file)}
	}
}
