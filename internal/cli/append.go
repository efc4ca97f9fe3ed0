package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/atomicfile"
	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/guard"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/internal/proc"
)

func init() {
	register(&command{
		name:    "append",
		summary: "append a line (or stdin) to FILE under its lock, whole or not at all",
		usage:   "append [flags] FILE TEXT...\nappend [flags] FILE -",
		help:    appendHelp,
		run:     runAppend,
	})
}

const appendHelp = `
Appends the TEXT words, joined by spaces, plus a newline (none with
--no-newline), or with - everything on stdin as it is, to FILE. It takes the
lock FILE.lock (or --lock-file, --name), the same lock 'hold run FILE' and
'hold update FILE' take (for a FILE whose name ends in .lock, also FILE's own
kernel lock, as they do), writes once with O_APPEND and fsyncs, so concurrent
appenders never interleave and a record reported written is on disk. If the
write fails (a full disk), FILE is cut back to its size before the write: no
torn record stays. A missing FILE is created unless --must-exist. Stdin is
read before the lock is taken (beyond 4 MiB it is spooled to a temp file in
$TMPDIR, not held in memory). A symlink in a sticky world-writable
directory such as /tmp is followed only if it is yours or the directory
owner's. Flags go before FILE.

Exit status: 0 when appended; 1 (or -E) when the lock is busy (-n) or the
wait timed out (-w); 66 when FILE cannot be opened (a directory, no
permission, missing with --must-exist); 73 when the disk is full or
read-only; see 'hold help' for the rest.
`

func runAppend(args []string) int {
	fs := newFlagSet("append", false)
	var lf lockFlags
	lf.addTo(fs)
	fs = exclusiveOnly(fs, "append")
	noNewline := fs.Bool("no-newline", false, "do not add a newline after TEXT")
	mustExist := fs.Bool("must-exist", false, "fail if FILE does not exist instead of creating it")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	rest := fs.Args()
	if len(rest) > 0 && rest[0] == "--" {
		rest = rest[1:]
	}
	if len(rest) == 0 || rest[0] == "" {
		return fail("append", usagef("missing FILE: hold append [flags] FILE TEXT... (or - for stdin)"), lf.conflictExit)
	}
	file, words := rest[0], rest[1:]
	if len(words) > 0 && words[0] == "--" {
		words = words[1:]
	}
	if len(words) == 0 {
		return fail("append", usagef("nothing to append: give TEXT, or - to append stdin"), lf.conflictExit)
	}
	if len(words) == 1 && words[0] == "-" {
		data, spool, err := readStdin()
		if err != nil {
			return fail("append", &hold.Error{Op: "append", Path: file, Err: err, Hint: "reading stdin; nothing was appended"}, lf.conflictExit)
		}
		if spool == nil {
			return guarded("append", &lf, file, func(l *hold.Lock) error {
				return atomicfile.AppendTo(atomicfile.OS{}, file, *mustExist, data, l.Check)
			})
		}
		defer spool.Close()
		return guarded("append", &lf, file, func(l *hold.Lock) error {
			return atomicfile.AppendFrom(atomicfile.OS{}, file, *mustExist, spool, l.Check)
		})
	}
	text := strings.Join(words, " ")
	if !*noNewline {
		text += "\n"
	}
	return guarded("append", &lf, file, func(l *hold.Lock) error {
		return atomicfile.AppendTo(atomicfile.OS{}, file, *mustExist, []byte(text), l.Check)
	})
}

// stdinInMemory is how much of stdin `hold append -` keeps in memory;
// more is spooled to a temp file.
const stdinInMemory = 4 << 20

// readStdin reads all of stdin before the lock is taken, so that a slow
// producer does not hold the lock, and an input cut short by Ctrl-C
// appends nothing. Up to stdinInMemory stays in memory and is returned as
// data, to be appended in one write; beyond that it all goes to spool, a
// temp file in $TMPDIR removed at once (on Windows when closed), so that
// input of any size costs little memory.
func readStdin() (data []byte, spool *spooled, err error) {
	buf := make([]byte, stdinInMemory)
	n, err := io.ReadFull(os.Stdin, buf)
	switch err {
	case io.EOF, io.ErrUnexpectedEOF:
		return buf[:n], nil, nil
	case nil:
	default:
		return nil, nil, err
	}
	f, err := os.CreateTemp("", "hold-append-stdin-*")
	if err != nil {
		return nil, nil, fmt.Errorf("stdin is over %d MiB and could not be spooled: %w", stdinInMemory>>20, err)
	}
	spool = &spooled{File: f}
	os.Remove(f.Name()) // fails on Windows while it is open; Close retries
	if _, err = f.Write(buf); err == nil {
		_, err = io.Copy(f, os.Stdin)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		spool.Close()
		return nil, nil, fmt.Errorf("stdin is over %d MiB and could not be spooled to %s: %w", stdinInMemory>>20, f.Name(), err)
	}
	return nil, spool, nil
}

// spooled is stdin spooled to a temp file, removed when closed.
type spooled struct{ *os.File }

func (s *spooled) Close() error {
	err := s.File.Close()
	os.Remove(s.Name())
	return err
}

// guarded is what append and update share: it refuses a FILE that can
// never be written (a directory) before creating a lock beside it, takes
// the lock as the flags say, runs work under it, and turns the outcome
// into a message and an exit status. Errors about FILE become *hold.Error
// with op and a hint, as the library's Update and Append return them.
func guarded(op string, lf *lockFlags, file string, work func(*hold.Lock) error) int {
	// exclusiveOnly keeps -s and --slots off the command line; this is
	// the rule itself, for any other way the flags might come to be set.
	if lf.shared || lf.slots != 1 {
		return fail(op, usagef("%s needs FILE's lock alone: -s and --slots do not apply", op), lf.conflictExit)
	}
	if err := guard.Refusal(op, file, lf.lockFile); err != nil {
		return fail(op, err, lf.conflictExit)
	}
	spec, err := lf.resolve(file)
	if err != nil {
		return fail(op, err, lf.conflictExit)
	}
	quietAbout(spec)
	defer spec.Close()
	// Nothing of this process can release a lock while it waits.
	spec.Opts = append(spec.Opts, hold.FailIfHeldHere())
	// The file is rewritten: a file named "*.lock", locked itself too,
	// must still be the file when the change is published
	// (hold.ForRewrite).
	spec.Opts = append(spec.Opts, hold.ForRewrite())
	// The filter's pipes and its grace timer need the runtime's poller,
	// which cannot be made once the lock has taken the last descriptors.
	if err := proc.ReadyForLock(op, spec.Label); err != nil {
		return fail(op, err, lf.conflictExit)
	}
	ctx, stopWait := interruptible(context.Background())
	l, err := spec.Acquire(ctx, os.Stderr)
	interrupted := context.Cause(ctx)
	stopWait()
	if err != nil {
		return fail(op, err, spec.ConflictExit)
	}
	var sig *errkind.SignalError
	if errors.As(interrupted, &sig) {
		l.Release()
		return fail(op, sig, spec.ConflictExit)
	}
	err = work(l)
	// A refused or failed command leaves no lock file it created.
	release := l.Release
	if err != nil {
		release = l.Discard
	}
	if rerr := release(); rerr != nil && err == nil {
		err = rerr
	}
	if err == nil {
		return 0
	}
	var fe *filterError
	if errors.As(err, &fe) {
		return failFilter(op, file, fe)
	}
	if errors.As(err, &sig) {
		return fail(op, err, spec.ConflictExit)
	}
	return fail(op, lockspec.FileError(op, file, err), spec.ConflictExit)
}
