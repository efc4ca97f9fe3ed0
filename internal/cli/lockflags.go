package cli

// How to extend hold.
//
// # Adding a subcommand
//
// Put it in its own file and register it from init; main.go needs no edit:
//
//	func init() {
//		register(&command{
//			name:    "append",
//			summary: "append stdin to TARGET under its lock",
//			usage:   "append [flags] TARGET",
//			help:    "What it does, its exit status and caveats.",
//			run:     runAppend,
//		})
//	}
//
//	func runAppend(args []string) int {
//		fs := newFlagSet("append", true) // true: flags may also follow TARGET
//		var lf lockFlags
//		lf.addTo(fs)                     // -n -w -s -x -E --verbose --lock-file --name --protocol ...
//		if code, done := parseFlags(fs, args); done {
//			return code
//		}
//		if fs.NArg() != 1 {
//			return fail("append", usagef("expected one TARGET"), lf.conflictExit)
//		}
//		spec, err := lf.resolve(fs.Arg(0))  // protocol, lock path, options, wait
//		if err != nil {
//			return fail("append", err, lf.conflictExit)
//		}
//		defer spec.Close()
//		ctx, stop := interruptible(context.Background()) // SIGINT/TERM/HUP end a wait
//		defer stop()
//		l, err := spec.Acquire(ctx, os.Stderr)  // -n/-w, "waiting for ... held by" messages
//		if err != nil {
//			return fail("append", err, lf.conflictExit)  // 1 or -E when busy, sysexits otherwise
//		}
//		defer l.Release()
//		...
//	}
//
// fail (exit.go) is the one place that turns an error into a message and an
// exit status; return usagef(...) for bad input and wrap exec failures in
// an errkind.ExecError so they map to the documented codes.
//
// # Adding a protocol
//
// A file registers it by name for --protocol (and HOLD_PROTOCOL), in the
// table the agent reads too:
//
//	func init() {
//		registerProtocol("dir", "portable directory lock (mkdir), for NFS/SMB and proper-lockfile",
//			func() (hold.Protocol, error) { return portable.New(), nil })
//	}
//
// If the returned protocol implements lock.Closer (a network client), the
// command closes it when done.
//
// # Adding an address scheme
//
// A target such as "etcd://127.0.0.1:2379/locks/deploy" names its protocol
// itself. The executable that links the backend registers a resolver for
// the scheme with lockspec.RegisterScheme (internal/etcdcli and
// internal/pgcli are the two); it gets the request's
// lockspec.Spec, whose Settings hold the connection settings
// (lockspec.RemoteSettings, flags on the command line, "settings" in an
// agent request).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/hold-dev/hold/internal/gnuflag"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/lockspec"
)

// registerProtocol makes a protocol selectable with --protocol NAME.
func registerProtocol(name, summary string, open func() (hold.Protocol, error)) {
	lockspec.RegisterProtocol(name, summary, open)
}

// lockFlags are the flags that say how to take a lock, shared by every
// subcommand that takes one. Their names and meanings are flock(1)'s where
// flock(1) has them. After the parse, spec turns them into a
// lockspec.Spec, the request the agent also builds from its JSON.
type lockFlags struct {
	nonblock     bool
	wait         seconds
	deadlock     seconds
	shared       bool
	exclusive    bool
	slots        int
	fair         bool
	makeDirs     bool
	conflictExit int
	verbose      bool
	quiet        bool
	lockFile     string
	name         string
	protocol     string
	fields       []string
	// settings are lockspec.RemoteSettings' flags, in that order.
	settings []*string

	fs *gnuflag.FlagSet
}

// addTo defines the lock flags on fs.
func (f *lockFlags) addTo(fs *gnuflag.FlagSet) {
	f.fs = fs
	f.wait = -1
	f.deadlock = -1
	fs.BoolVarP(&f.nonblock, "nonblock", "n", false, "fail at once (exit 1, or -E) if the lock is held")
	fs.BoolVar(&f.nonblock, "nb", false, "same as --nonblock (flock(1)'s other name for it)")
	fs.VarP(&f.wait, "wait", "w", "wait at most `SECONDS` for a busy lock (fractions allowed; 0 means --nonblock), then fail with exit 1 (or -E); a free lock is taken however small SECONDS is")
	fs.Var(&f.wait, "timeout", "same as --wait `SECONDS` (flock(1)'s other name for it)")
	fs.BoolVarP(&f.shared, "shared", "s", false, "take a shared (reader) lock")
	fs.IntVarP(&f.slots, "slots", "", 1, "take one of `N` slots of a counting semaphore: at most N holders at once, each told its slot in HOLD_SLOT (0 to N-1); every holder must use the same N while any slot is held")
	fs.BoolVarP(&f.exclusive, "exclusive", "x", false, "take an exclusive (writer) lock (the default; -e too, as flock(1))")
	fs.AliasShorthand("e", "exclusive")
	fs.IntVarP(&f.conflictExit, "conflict-exit-code", "E", exitConflict, "exit `N` (0-255) on a busy lock or a timed-out wait")
	fs.BoolVar(&f.verbose, "verbose", false, "report waiting (who holds the lock), acquiring, and a busy lock or timed-out wait on stderr, even when it is not a terminal")
	fs.BoolVarP(&f.quiet, "quiet", "q", false, "say nothing about a busy lock, a timed-out wait or a lock taken without a record, even on a terminal (the exit status still tells)")
	fs.StringVar(&f.lockFile, "lock-file", "", "use exactly the lock file `PATH` instead of TARGET.lock")
	fs.StringVar(&f.name, "name", "", "named lock `NAME` in your private lock directory (then no TARGET)")
	fs.StringVar(&f.protocol, "protocol", lockspec.DefaultProtocolName(), "lock protocol `NAME`: "+strings.Join(lockspec.ProtocolNames(), ", ")+"; "+lockspec.ProtocolEnv+" sets the default")
	fs.StringArrayVar(&f.fields, "field", nil, "add `KEY=VALUE` to the owner record that status shows (repeatable)")
	fs.BoolVar(&f.fair, "fair", false, "wait in line: fair waiters get the lock in arrival order (unix)")
	fs.Var(&f.deadlock, "deadlock-after", "after `SECONDS` of waiting (default 1; 0: never), look for a cycle of waits between processes, which fails the latest with exit 70 (local locks: Linux; etcd and PostgreSQL: everywhere)")
	fs.BoolVar(&f.makeDirs, "make-dirs", false, "make the lock file's missing parent directories (by default a missing one is an error, exit 66)")
	for _, s := range lockspec.RemoteSettings {
		usage := s.Usage + " (default $" + s.Env
		if s == lockspec.EtcdTTL {
			usage += fmt.Sprintf(", else %d", lockspec.EtcdDefaultTTL)
		}
		f.settings = append(f.settings, fs.String(s.Flag, "", usage+")"))
	}
}

// spec is the request the parsed flags make with target. Fields are
// checked by resolve.
func (f *lockFlags) spec(target string) lockspec.Spec {
	s := lockspec.Spec{
		Target:       target,
		WaitGiven:    f.wait >= 0,
		Nonblock:     f.nonblock,
		Shared:       f.shared,
		Exclusive:    f.exclusive,
		Fair:         f.fair,
		MakeDirs:     f.makeDirs,
		LockFile:     f.lockFile,
		Name:         f.name,
		Verbose:      f.verbose,
		Quiet:        f.quiet,
		ConflictExit: f.conflictExit,
	}
	if s.WaitGiven {
		s.Wait = lockspec.SecondsToWait(float64(f.wait))
	}
	if f.fs.Changed("slots") {
		s.Slots, s.SlotsGiven = f.slots, true
	}
	if f.deadlock >= 0 {
		s.DeadlockAfter, s.DeadlockAfterGiven = lockspec.SecondsToWait(float64(f.deadlock)), true
	}
	if f.fs.Changed("protocol") {
		s.Protocol, s.ProtocolGiven = f.protocol, true
	}
	for i, st := range lockspec.RemoteSettings {
		if fl := f.fs.Lookup(st.Flag); fl != nil && fl.Changed {
			if s.Settings == nil {
				s.Settings = lockspec.Settings{}
			}
			s.Settings[st.Flag] = *f.settings[i]
		}
	}
	return s
}

// resolve checks the flags and turns them, with target, into the lock to
// take. Its errors are usage errors (exit 64) except a protocol that fails
// to open. Call Close on the result when done.
func (f *lockFlags) resolve(target string) (*lockspec.Resolved, error) {
	if err := f.checkEmpty(); err != nil {
		return nil, err
	}
	s := f.spec(target)
	if err := s.Check(); err != nil {
		return nil, err
	}
	for _, kv := range f.fields {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--field wants KEY=VALUE, not %q", kv)
		}
		s.Fields = append(s.Fields, lockspec.Field{Key: k, Value: v})
	}
	return s.Resolve()
}

// checkEmpty refuses --name or --lock-file given an empty value (as an
// unset shell variable gives it), which would otherwise read as the flag
// left out and be reported as a missing TARGET.
func (f *lockFlags) checkEmpty() error {
	if f.fs.Changed("name") && f.name == "" {
		return usagef("--name was given an empty NAME (an unset variable?): a name is one lowercase component such as nightly-backup")
	}
	if f.fs.Changed("lock-file") && f.lockFile == "" {
		return usagef("--lock-file was given an empty PATH (an unset variable?)")
	}
	return nil
}

// quietAbout makes fail say nothing of a busy lock or a timed-out wait on
// spec where spec.Tells says so: for the commands that take a lock (run,
// update, append), not those that only look at one (status, break).
func quietAbout(spec *lockspec.Resolved) { quietConflict = !spec.Tells(os.Stderr) }

// seconds is a flag value in seconds, fractions allowed. Negative means
// unset (wait forever).
type seconds float64

// String returns the value as given, or "" when unset.
func (s *seconds) String() string {
	if *s < 0 {
		return ""
	}
	return strconv.FormatFloat(float64(*s), 'g', -1, 64)
}

// Set parses a number of seconds >= 0.
func (s *seconds) Set(v string) error {
	x, err := strconv.ParseFloat(v, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || x < 0 || x != x {
		return fmt.Errorf("want a number of seconds >= 0, got %q", v)
	}
	if x > maxWait {
		return fmt.Errorf("%s seconds is more than hold waits for: at most %g (about 31 years); leave -w out to wait as long as it takes", v, float64(maxWait))
	}
	*s = seconds(x)
	return nil
}

// maxWait is the longest -w: a wait in nanoseconds overflows near 292
// years, and a round bound well inside that is easy to state.
const maxWait = 1e9

// Type names the value in flag errors.
func (s *seconds) Type() string { return "seconds" }

// newFlagSet returns the flag set of subcommand name. With interspersed
// false, parsing stops at the first argument that is not a flag (TARGET),
// so that everything after it belongs to the command being run, as with
// flock(1): `hold run -n T -- cmd -x`.
func newFlagSet(name string, interspersed bool) *gnuflag.FlagSet {
	fs := gnuflag.NewFlagSet("hold " + name)
	fs.SetInterspersed(interspersed)
	return fs
}

// parseFlags parses args into fs. When done is true the caller returns
// code at once: 0 after --help, 64 after a usage error (already printed).
func parseFlags(fs *gnuflag.FlagSet, args []string) (code int, done bool) {
	help := fs.BoolP("help", "h", false, "show this help")
	if describeFlags != nil {
		describeFlags(fs)
		return 0, true
	}
	err := fs.Parse(args)
	if errors.Is(err, gnuflag.ErrHelp) || (err == nil && *help) {
		printCommandHelp(os.Stdout, fs, helpInFull)
		return 0, true
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", fs.Name(), err)
		fmt.Fprintf(os.Stderr, "Run '%s --help' for usage.\n", fs.Name())
		return exitUsage, true
	}
	return 0, false
}

// helpInFull: --help prints a command's whole help, not its first screen
// (command.brief); `hold help CMD` sets it.
var helpInFull bool

// printCommandHelp prints the usage, flags and help text of the command
// whose flag set is fs: everything when full is set or the command has no
// brief, else its first screen (printBriefHelp).
func printCommandHelp(w io.Writer, fs *gnuflag.FlagSet, full bool) {
	name := strings.TrimPrefix(fs.Name(), "hold ")
	c := commands[name]
	if c != nil && c.brief != nil && !full {
		printBriefHelp(w, fs, c)
		return
	}
	fmt.Fprintln(w, "Usage:")
	if c != nil {
		for _, u := range strings.Split(c.usage, "\n") {
			fmt.Fprintf(w, "  hold %s\n", u)
		}
		if c.summary != "" {
			fmt.Fprintf(w, "\n%s\n", c.summary)
		}
	}
	fmt.Fprintf(w, "\nFlags:\n%s", fs.Usages(100))
	if c != nil && c.help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.help))
	}
}

// interruptible returns a context that SIGINT, SIGTERM or SIGHUP cancel,
// with a cause that makes the exit status 128+signal. Use it for a wait;
// stop restores the default signal behaviour.
func interruptible(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs, stopSignals := notifySignals()
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			cancel(&errkind.SignalError{Sig: sig})
		case <-done:
		}
	}()
	return ctx, func() {
		close(done)
		stopSignals()
		cancel(nil)
	}
}

// printBriefHelp prints the first screen of c's help, for `hold CMD
// --help`: its usage and summary, the flags c.brief names, the exit
// statuses in brief, and where the rest is.
func printBriefHelp(w io.Writer, fs *gnuflag.FlagSet, c *command) {
	fmt.Fprintln(w, "Usage:")
	for _, u := range strings.Split(c.usage, "\n") {
		fmt.Fprintf(w, "  hold %s\n", u)
	}
	fmt.Fprintf(w, "\n%s\n", c.summary)
	own, hold, _ := slicesCut(c.brief, "")
	for _, part := range []struct {
		title string
		names []string
	}{{"Flags, as in flock(1):", own}, {"The most used of hold's own:", hold}} {
		sub := newFlagSet(c.name, false)
		for _, n := range part.names {
			f := fs.Lookup(n)
			if f == nil {
				panic("hold: the brief help of " + c.name + " names no flag --" + n)
			}
			if u, ok := briefUsage[n]; ok {
				short := *f
				short.Usage = u
				f = &short
			}
			sub.AddFlag(f)
		}
		fmt.Fprintf(w, "\n%s\n%s", part.title, sub.Usages(100))
	}
	fmt.Fprintf(w, "\n%s\nSee 'hold help %s' or 'man hold' for all of its flags and how it behaves.\n", briefExitStatuses(), c.name)
}

// briefUsage is a flag's text on a first screen of --help, where its
// whole text (hold help CMD) would take more lines than the screen has.
var briefUsage = map[string]string{
	"wait":    "wait at most `SECONDS` for a busy lock, then fail with exit 1 (or -E)",
	"verbose": "report waits, busy locks and timeouts on stderr, even off a terminal",
	"slots":   "take one of `N` slots: at most N holders at once (HOLD_SLOT)",
	"quiet":   "say nothing of a busy lock or a timeout, even on a terminal",
}

// slicesCut splits s around the first sep, as strings.Cut does.
func slicesCut(s []string, sep string) (before, after []string, found bool) {
	if i := slices.Index(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, nil, false
}
