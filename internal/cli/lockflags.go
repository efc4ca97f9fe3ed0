// The lock flags every locking subcommand shares, and how to extend hold.
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
//		defer spec.close()
//		ctx, stop := interruptible(context.Background()) // SIGINT/TERM/HUP end a wait
//		defer stop()
//		l, err := spec.acquire(ctx, os.Stderr)  // -n/-w, "waiting for ... held by" messages
//		if err != nil {
//			return fail("append", err, lf.conflictExit)  // 1 or -E when busy, sysexits otherwise
//		}
//		defer l.Release()
//		...
//	}
//
// fail (exit.go) is the one place that turns an error into a message and an
// exit status; return usagef(...) for bad input and wrap exec failures with
// errkind.ExecError so they map to the documented codes.
//
// # Adding a protocol
//
// A file registers it by name for --protocol (and HOLD_PROTOCOL):
//
//	func init() {
//		registerProtocol("dir", "portable directory lock (mkdir), for NFS/SMB and proper-lockfile",
//			func() (hold.Protocol, error) { return dirlock.Protocol{}, nil })
//	}
//
// If the returned protocol implements lock.Closer (a network client), the
// command closes it when done.
//
// # Adding an address scheme
//
// A target such as "etcd://127.0.0.1:2379/locks/deploy" names its protocol
// itself. A file registers a resolver for the scheme; it returns the
// protocol and the lock path (for etcd, the key) to use for that target.
// It gets the parsed flag set too (nil if there is none), to read flags
// the same file added with registerLockFlag (TLS files, credentials):
//
//	func init() {
//		registerScheme("etcd", func(target string, fs *gnuflag.FlagSet) (hold.Protocol, string, error) {
//			u, err := url.Parse(target)
//			...
//			return etcdProtocol, key, nil
//		})
//	}
//
// # Adding a lock flag
//
// A flag that only turns into hold options (like --fair) is registered with
// registerLockFlag and then appears on every subcommand that uses lockFlags:
//
//	func init() {
//		registerLockFlag(func(fs *gnuflag.FlagSet) func() ([]hold.Option, error) {
//			fair := fs.Bool("fair", false, "wait in line: first come, first served")
//			return func() ([]hold.Option, error) {
//				if *fair {
//					return []hold.Option{hold.Fair()}, nil
//				}
//				return nil, nil
//			}
//		})
//	}
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hold-dev/hold/internal/gnuflag"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/lock"
)

// defaultProtocol is the protocol used when neither --protocol nor
// HOLD_PROTOCOL names one: the kernel lock.
const defaultProtocol = "flock"

// protocolEnv names the environment variable that sets the default protocol.
const protocolEnv = "HOLD_PROTOCOL"

// protocolEntry is a protocol --protocol can name.
type protocolEntry struct {
	summary string
	open    func() (hold.Protocol, error)
}

// schemeResolver turns an address-style target ("etcd://host:port/key")
// into the protocol serving it and the lock path (or key) within it. fs is
// the subcommand's parsed flag set, or nil.
type schemeResolver func(target string, fs *gnuflag.FlagSet) (proto hold.Protocol, lockPath string, err error)

// lockFlagAdder defines extra lock flags on fs and returns a function that,
// once fs is parsed, turns them into options.
type lockFlagAdder func(fs *gnuflag.FlagSet) func() ([]hold.Option, error)

// The extension tables. Like commands, they are filled by init functions
// and only read afterwards.
var (
	protocols  = map[string]protocolEntry{}
	schemes    = map[string]schemeResolver{}
	extraFlags []lockFlagAdder
)

func init() {
	registerProtocol(defaultProtocol, "kernel lock: flock(2) on unix, LockFileEx on Windows (default)",
		func() (hold.Protocol, error) { return flock.Protocol{}, nil })
}

// registerProtocol makes a protocol selectable with --protocol NAME.
func registerProtocol(name, summary string, open func() (hold.Protocol, error)) {
	if _, dup := protocols[name]; dup {
		panic("hold: protocol registered twice: " + name)
	}
	protocols[name] = protocolEntry{summary: summary, open: open}
}

// registerScheme makes targets of the form "SCHEME://..." resolve through r.
func registerScheme(scheme string, r schemeResolver) {
	if _, dup := schemes[scheme]; dup {
		panic("hold: address scheme registered twice: " + scheme)
	}
	schemes[scheme] = r
}

// registerLockFlag adds a flag to every subcommand that uses lockFlags.
func registerLockFlag(add lockFlagAdder) { extraFlags = append(extraFlags, add) }

// protocolNames lists the registered protocols, sorted.
func protocolNames() []string {
	names := make([]string, 0, len(protocols))
	for n := range protocols {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// lockFlags are the flags that say how to take a lock, shared by every
// subcommand that takes one. Their names and meanings are flock(1)'s where
// flock(1) has them.
type lockFlags struct {
	nonblock     bool
	wait         seconds
	shared       bool
	exclusive    bool
	conflictExit int
	verbose      bool
	lockFile     string
	name         string
	protocol     string
	fields       []string

	fs    *gnuflag.FlagSet
	extra []func() ([]hold.Option, error)
}

// addTo defines the lock flags on fs.
func (f *lockFlags) addTo(fs *gnuflag.FlagSet) {
	f.fs = fs
	f.wait = -1
	defProto := os.Getenv(protocolEnv)
	if defProto == "" {
		defProto = defaultProtocol
	}
	fs.BoolVarP(&f.nonblock, "nonblock", "n", false, "fail at once (exit 1, or -E) if the lock is held")
	fs.BoolVar(&f.nonblock, "nb", false, "same as --nonblock (flock(1)'s other name for it)")
	fs.VarP(&f.wait, "wait", "w", "wait at most `SECONDS` for a busy lock (fractions allowed; 0 means --nonblock), then fail with exit 1 (or -E); a free lock is taken however small SECONDS is")
	fs.Var(&f.wait, "timeout", "same as --wait `SECONDS` (flock(1)'s other name for it)")
	fs.BoolVarP(&f.shared, "shared", "s", false, "take a shared (reader) lock")
	fs.BoolVarP(&f.exclusive, "exclusive", "x", false, "take an exclusive (writer) lock (the default)")
	fs.IntVarP(&f.conflictExit, "conflict-exit-code", "E", exitConflict, "exit status `N` (0-255) when the lock is busy or the wait timed out")
	fs.BoolVar(&f.verbose, "verbose", false, "report waiting (who holds the lock) and acquiring on stderr")
	fs.StringVar(&f.lockFile, "lock-file", "", "use exactly the lock file `PATH` instead of TARGET.lock")
	fs.StringVar(&f.name, "name", "", "use the named lock `NAME` in your private lock directory (TARGET may then be omitted)")
	fs.StringVar(&f.protocol, "protocol", defProto, "lock protocol `NAME`: "+strings.Join(protocolNames(), ", ")+"; "+protocolEnv+" sets the default")
	fs.StringArrayVar(&f.fields, "field", nil, "add `KEY=VALUE` to the owner record that status shows (repeatable)")
	for _, add := range extraFlags {
		f.extra = append(f.extra, add(fs))
	}
}

// lockSpec is a fully resolved lock request: what to lock, how, and how
// long to wait.
type lockSpec struct {
	// target is what the user named (may be empty with --name).
	target string
	// label names the lock to people and to HOLD_TARGET: the target, or
	// the --name or --lock-file given instead.
	label string
	// proto is the protocol taking the lock.
	proto hold.Protocol
	// opts are the options for hold.Acquire, TryAcquire and Inspect.
	opts []hold.Option
	// nonblock: do not wait at all.
	nonblock bool
	// timeout bounds the wait; zero means wait until interrupted.
	timeout time.Duration
	// verbose asks for progress messages even off a terminal.
	verbose bool
	// conflictExit is the exit status for busy or timed out.
	conflictExit int
	// warnMachineLocal: the kernel lock was chosen by default (neither
	// --protocol nor HOLD_PROTOCOL), so say so when the filesystem may
	// keep it on this machine (see acquire).
	warnMachineLocal bool
}

// resolve checks the flags and turns them, with target, into a lockSpec.
// Its errors are usage errors (exit 64) except a protocol that fails to
// open. Call close on the result when done.
func (f *lockFlags) resolve(target string) (*lockSpec, error) {
	if f.conflictExit < 0 || f.conflictExit > 255 {
		return nil, usagef("--conflict-exit-code must be between 0 and 255, not %d", f.conflictExit)
	}
	if f.shared && f.exclusive {
		return nil, usagef("--shared and --exclusive exclude each other")
	}
	if f.lockFile != "" && f.name != "" {
		return nil, usagef("--lock-file and --name exclude each other")
	}
	if target == "" && f.lockFile == "" && f.name == "" {
		return nil, usagef("no TARGET given (or --lock-file PATH, or --name NAME)")
	}
	s := &lockSpec{target: target, label: target, verbose: f.verbose, conflictExit: f.conflictExit}
	if s.label == "" {
		s.label = f.name + f.lockFile // at most one of them is set
	}
	switch {
	case f.nonblock || f.wait == 0:
		s.nonblock = true
	case f.wait > 0:
		s.timeout = time.Duration(float64(f.wait) * float64(time.Second))
	}
	if f.shared {
		s.opts = append(s.opts, hold.Shared())
	}
	for _, kv := range f.fields {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--field wants KEY=VALUE, not %q", kv)
		}
		s.opts = append(s.opts, hold.Field(k, v))
	}
	s.opts = append(s.opts, debugOptions()...)
	for _, extra := range f.extra {
		o, err := extra()
		if err != nil {
			return nil, err
		}
		s.opts = append(s.opts, o...)
	}

	if addressScheme(target) != "" {
		if f.lockFile != "" || f.name != "" {
			return nil, usagef("--lock-file and --name do not apply to an address target like %q", target)
		}
		proto, lockPath, err := resolveAddress(target, f.fs)
		if err != nil {
			return nil, err
		}
		if f.fs != nil && f.fs.Changed("protocol") && f.protocol != proto.Name() {
			closeProtocol(proto)
			return nil, usagef("--protocol %s conflicts with the address %q", f.protocol, target)
		}
		s.proto = proto
		s.opts = append(s.opts, hold.WithProtocol(proto), hold.LockFile(lockPath))
		return s, nil
	}

	entry, ok := protocols[f.protocol]
	if !ok {
		return nil, usagef("unknown protocol %q (known: %s)", f.protocol, strings.Join(protocolNames(), ", "))
	}
	proto, err := entry.open()
	if err != nil {
		return nil, err
	}
	s.proto = proto
	s.opts = append(s.opts, hold.WithProtocol(proto))
	s.warnMachineLocal = f.protocol == defaultProtocol && os.Getenv(protocolEnv) == "" && (f.fs == nil || !f.fs.Changed("protocol"))
	switch {
	case f.lockFile != "":
		s.opts = append(s.opts, hold.LockFile(f.lockFile))
	case f.name != "":
		s.opts = append(s.opts, hold.Named(f.name))
	}
	return s, nil
}

// resolveAddress returns the protocol serving an address-style target
// ("etcd://host:port/key") and the lock path (or key) within it, handing
// the command line over to hold-remote first if this executable does not
// serve the scheme. fs is the subcommand's parsed flag set, or nil.
func resolveAddress(target string, fs *gnuflag.FlagSet) (hold.Protocol, string, error) {
	if err := handOffIfRemote(target); err != nil {
		return nil, "", err
	}
	scheme := addressScheme(target)
	resolve, known := schemes[scheme]
	if !known {
		return nil, "", usagef("unknown address scheme %q in %q (known: %s)", scheme, target, strings.Join(schemeNames(), ", "))
	}
	return resolve(target, fs)
}

// close releases what the protocol holds open (a network client).
func (s *lockSpec) close() { closeProtocol(s.proto) }

func closeProtocol(p hold.Protocol) {
	if c, ok := p.(lock.Closer); ok {
		c.Close()
	}
}

// inspect reports the lock's state without taking it.
func (s *lockSpec) inspect() (*hold.Status, error) {
	return hold.InspectAny(s.target, s.opts...)
}

func schemeNames() []string {
	names := make([]string, 0, len(schemes))
	for n := range schemes {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) == 0 {
		return []string{"none"}
	}
	return names
}

// seconds is a flag value in seconds, fractions allowed. Negative means
// unset (wait forever).
type seconds float64

func (s *seconds) String() string {
	if *s < 0 {
		return ""
	}
	return strconv.FormatFloat(float64(*s), 'g', -1, 64)
}

func (s *seconds) Set(v string) error {
	x, err := strconv.ParseFloat(v, 64)
	if err != nil || x < 0 || x != x || x > 1e9 {
		return fmt.Errorf("want a number of seconds >= 0, got %q", v)
	}
	*s = seconds(x)
	return nil
}

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
		printCommandHelp(os.Stdout, fs)
		return 0, true
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", fs.Name(), err)
		fmt.Fprintf(os.Stderr, "Run '%s --help' for usage.\n", fs.Name())
		return exitUsage, true
	}
	return 0, false
}

// printCommandHelp prints the usage, flags and help text of the command
// whose flag set is fs.
func printCommandHelp(w io.Writer, fs *gnuflag.FlagSet) {
	name := strings.TrimPrefix(fs.Name(), "hold ")
	c := commands[name]
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
