// Package lockspec is a lock request as one typed value: the target and
// every lock option, which the command line fills from its flags and the
// agent from its JSON requests. Resolve is the one place that checks a
// request and turns it into what hold.Acquire needs, so that both front
// ends accept exactly the same requests, with the same messages.
//
// The package also keeps the tables that extend hold: the protocols
// --protocol can name, the address schemes (etcd://...) and their
// settings, and the companion executables that serve network schemes.
package lockspec

import (
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// Spec is what a lock request says. Its zero value asks for an
// exclusive lock on Target with the default protocol, waiting as long as
// it takes.
type Spec struct {
	// Target is the file (or address) to lock; empty with LockFile or Name.
	Target string
	// Wait bounds the wait for a busy lock when WaitGiven; a zero Wait
	// means Nonblock.
	Wait      time.Duration
	WaitGiven bool
	// Nonblock: fail at once if the lock is busy.
	Nonblock bool
	// Shared asks for a shared lock; Exclusive says exclusive explicitly
	// (both at once are refused).
	Shared, Exclusive bool
	// Fair: wait in line (hold.Fair).
	Fair bool
	// Protocol names the protocol when ProtocolGiven; otherwise
	// HOLD_PROTOCOL does, else the kernel lock.
	Protocol      string
	ProtocolGiven bool
	// LockFile and Name replace the lock path derived from Target; at
	// most one may be set.
	LockFile, Name string
	// Fields are added to the owner record, in order.
	Fields []Field
	// Settings are the network backends' connection settings given
	// with the request, by setting name (see Setting).
	Settings Settings
	// Verbose asks for progress messages even off a terminal.
	Verbose bool
	// Quiet asks for no message about a busy lock, a timed-out wait or
	// a lock taken without a record, even on a terminal.
	Quiet bool
	// ConflictExit is the exit status for a busy lock or a timed-out wait.
	ConflictExit int
	// FailIfHeldHere: the caller cannot release anything while it waits,
	// so a wait for a lock this process holds is a deadlock
	// (hold.FailIfHeldHere).
	FailIfHeldHere bool
	// Caller is the program the request is made for, when not this
	// process (the agent's client): deadlock errors name it, and its
	// ancestors' locks are judged from its place (proc.WithCaller).
	Caller int
	// CallerKeeps are the kernel locks the Caller holds in its own
	// process and keeps while this request waits (proc.WithCallerKeeps).
	CallerKeeps []proc.HeldFile
	// Stale is the lock's own stale time for the portable protocol
	// (hold.StaleAfter); zero: the protocol's (HOLD_DIR_STALE).
	Stale time.Duration
	// Heartbeat is how often the holder of a portable lock refreshes it
	// (hold.Heartbeat); zero: the protocol's.
	Heartbeat time.Duration
	// LostIfTouched counts a portable lock whose time stamp someone else
	// changed lost (hold.LostIfTouched).
	LostIfTouched bool
	// DeadlockAfter is how long a wait lasts before it looks for a
	// deadlock between processes, when DeadlockAfterGiven
	// (hold.DeadlockAfter); zero turns the search off.
	DeadlockAfter      time.Duration
	DeadlockAfterGiven bool
	// MakeDirs makes the lock file's missing directories (hold.MakeDirs);
	// Mode is a created lock file's permission bits (hold.LockFileMode).
	MakeDirs bool
	// SoftFile holds a portable lock as filelock's SoftFileLock does, a
	// plain file naming the holder (hold.SoftFile).
	SoftFile bool
	Mode     fs.FileMode
	// Slots, when SlotsGiven, asks for one of Slots places of a counting
	// semaphore (hold.Slots); it must be at least 1, and 1 is the lock
	// itself.
	Slots      int
	SlotsGiven bool
}

// Field is one KEY=VALUE of the owner record.
type Field struct{ Key, Value string }

// Settings are connection settings by name (Setting.Flag).
type Settings map[string]string

// Resolved is a checked lock request: what to lock, how, and how long to
// wait. It is immutable; Close releases what its protocol holds open.
type Resolved struct {
	// Target is what the request named (may be empty with Name).
	Target string
	// Label names the lock to people and to HOLD_TARGET: the target, or
	// the name or lock file given instead.
	Label string
	// Proto is the protocol taking the lock.
	Proto hold.Protocol
	// Opts are the options for hold.Acquire and TryAcquire: first those
	// that name the lock (Inspect passes those alone), then those about
	// taking it.
	Opts []hold.Option
	// Nonblock: do not wait at all.
	Nonblock bool
	// Timeout bounds the wait; zero means wait until interrupted.
	Timeout time.Duration
	// Verbose asks for progress messages even off a terminal.
	Verbose bool
	// Quiet asks for none about the wait, even on a terminal (Tells).
	Quiet bool
	// ConflictExit is the exit status for busy or timed out.
	ConflictExit int
	// WarnMachineLocal: the kernel lock was chosen by default (neither a
	// protocol nor HOLD_PROTOCOL given), so Acquire says so when the
	// filesystem may keep it on this machine.
	WarnMachineLocal bool
	// Key names the lock and the mode asked for, as a comparable value:
	// two requests for the same lock in the same mode have equal keys.
	Key Key

	// caller is the program the request is made for (Spec.Caller), put
	// on the context of the wait (proc.WithCaller).
	caller int
	// callerKeeps is Spec.CallerKeeps, put on the context of the wait
	// (proc.WithCallerKeeps).
	callerKeeps []proc.HeldFile
	// stale is Spec.Stale, which Inspect judges by too.
	stale time.Duration
	// release, when set, ends this request's use of a kept protocol
	// (KeepSessions) instead of closing it.
	release func()
	// naming is how many of Opts name the lock.
	naming int
	// opts is Opts's storage, so that a request with few options costs
	// one allocation.
	opts [6]hold.Option
}

// Key is what names a lock and the mode it is asked for in: the target,
// the protocol (the one resolved, so that naming the default protocol or
// not makes no difference), the lock file or name, shared and fair.
type Key struct {
	Target, Protocol, LockFile, Name string
	Shared, Fair                     bool
	// Slots is the semaphore's number of slots, 0 for a plain lock.
	Slots int
}

// Check refuses a request whose options contradict each other. Resolve
// checks the same; a front end calls it first only to report these
// errors before its own.
func (s *Spec) Check() error {
	if s.ConflictExit < 0 || s.ConflictExit > 255 {
		return errkind.Usagef("--conflict-exit-code must be between 0 and 255, not %d", s.ConflictExit)
	}
	if s.Quiet && s.Verbose {
		return errkind.Usagef("--quiet and --verbose exclude each other")
	}
	if s.Shared && s.Exclusive {
		return errkind.Usagef("--shared and --exclusive exclude each other")
	}
	if s.LockFile != "" && s.Name != "" {
		return errkind.Usagef("--lock-file and --name exclude each other")
	}
	if s.SlotsGiven && s.Slots < 1 {
		return errkind.Usagef("--slots must be at least 1, not %d (1 is the plain lock)", s.Slots)
	}
	if s.SlotsGiven && s.Slots > 1 && s.Shared {
		return errkind.Usagef("--slots and --shared exclude each other: a slot of a semaphore has one holder")
	}
	if s.Target == "" && s.LockFile == "" && s.Name == "" {
		return errkind.Usagef("no TARGET given (or --lock-file PATH, or --name NAME)")
	}
	return nil
}

// Resolve checks the request and turns it into a Resolved. Its errors are
// usage errors except a protocol that fails to open. An address target
// this executable does not serve hands the process over to a companion
// (see HandOffIfRemote) before anything is resolved. Call Close on the
// result when done.
func (s *Spec) Resolve() (*Resolved, error) {
	r := new(Resolved)
	if err := s.ResolveInto(r); err != nil {
		return nil, err
	}
	return r, nil
}

// ResolveInto is Resolve into a Resolved of the caller's, for a caller
// that keeps it inside a value of its own: one allocation less per
// request. r must not be copied afterwards (its Opts use its storage).
func (s *Spec) ResolveInto(r *Resolved) error {
	if err := s.Check(); err != nil {
		return err
	}
	*r = Resolved{Target: s.Target, Label: s.Target, Verbose: s.Verbose, Quiet: s.Quiet, ConflictExit: s.ConflictExit,
		Key: Key{Target: s.Target, LockFile: s.LockFile, Name: s.Name, Shared: s.Shared, Fair: s.Fair}, caller: s.Caller, callerKeeps: s.CallerKeeps}
	if s.SlotsGiven && s.Slots > 1 {
		r.Key.Slots = s.Slots
	}
	r.Opts = r.opts[:0]
	if r.Label == "" {
		r.Label = s.Name + s.LockFile // at most one of them is set
	}
	switch {
	case s.Nonblock || s.WaitGiven && s.Wait <= 0:
		r.Nonblock = true
	case s.WaitGiven:
		r.Timeout = s.Wait
	}
	// The options that name the lock come first, so that Inspect can
	// pass them alone (hold refuses the others there); the options about
	// taking it follow (takeOptions).
	r.Opts = append(r.Opts, DebugOptions()...)
	if s.Fair {
		r.Opts = append(r.Opts, hold.Fair())
	}

	if AddressScheme(s.Target) != "" {
		if s.LockFile != "" || s.Name != "" {
			return errkind.Usagef("--lock-file and --name do not apply to an address target like %q", s.Target)
		}
		// A copy goes to the resolver, so that a request for a local lock
		// does not escape to the heap for the sake of this one.
		sc := *s
		if err := HandOffIfRemote(s.Target); err != nil {
			return err
		}
		proto, lockPath, release, ok, err := resolveKept(s.Target, &sc)
		if !ok {
			proto, lockPath, err = ResolveAddress(s.Target, &sc)
			release = nil
		}
		if err != nil {
			return err
		}
		r.release = release
		if s.ProtocolGiven && s.Protocol != proto.Name() {
			r.Close()
			return errkind.Usagef("--protocol %s conflicts with the address %q", s.Protocol, s.Target)
		}
		r.Proto, r.Key.Protocol = proto, proto.Name()
		r.Opts = append(r.Opts, hold.WithProtocol(proto), hold.LockFile(lockPath))
		s.takeOptions(r)
		return nil
	}

	name, fromEnv := s.Protocol, ""
	if !s.ProtocolGiven {
		if fromEnv = os.Getenv(ProtocolEnv); fromEnv != "" {
			name = fromEnv
		} else {
			name = DefaultProtocol
		}
	}
	entry, ok := protocols[name]
	if !ok {
		return errkind.Usagef("unknown protocol %q (known: %s)", name, strings.Join(ProtocolNames(), ", "))
	}
	proto, opt, err := entry.resolve()
	if err != nil {
		return err
	}
	r.Proto, r.Key.Protocol = proto, name
	r.Opts = append(r.Opts, opt)
	r.WarnMachineLocal = !s.ProtocolGiven && fromEnv == ""
	switch {
	case s.LockFile != "":
		r.Opts = append(r.Opts, hold.LockFile(s.LockFile))
	case s.Name != "":
		r.Opts = append(r.Opts, hold.Named(s.Name))
	}
	s.takeOptions(r)
	return nil
}

// takeOptions appends to r's options, which name the lock, the options
// about taking it, after noting where they start.
func (s *Spec) takeOptions(r *Resolved) {
	r.naming = len(r.Opts)
	if s.Shared {
		r.Opts = append(r.Opts, hold.Shared())
	}
	if s.SlotsGiven {
		r.Opts = append(r.Opts, hold.Slots(s.Slots))
	}
	for _, f := range s.Fields {
		r.Opts = append(r.Opts, hold.Field(f.Key, f.Value))
	}
	if s.FailIfHeldHere {
		r.Opts = append(r.Opts, hold.FailIfHeldHere())
	}
	if s.Stale > 0 {
		r.Opts = append(r.Opts, hold.StaleAfter(s.Stale))
		r.stale = s.Stale
	}
	if s.Heartbeat > 0 {
		r.Opts = append(r.Opts, hold.Heartbeat(s.Heartbeat))
	}
	if s.LostIfTouched {
		r.Opts = append(r.Opts, hold.LostIfTouched())
	}
	if s.MakeDirs {
		r.Opts = append(r.Opts, hold.MakeDirs())
	}
	if s.SoftFile {
		r.Opts = append(r.Opts, hold.SoftFile())
	}
	if s.DeadlockAfterGiven {
		r.Opts = append(r.Opts, hold.DeadlockAfter(s.DeadlockAfter))
	}
	if s.Mode != 0 {
		r.Opts = append(r.Opts, hold.LockFileMode(s.Mode))
	}
}

// DialTimeout returns how long a backend may take to connect for s: at
// most def, and no longer than its wait when one was given, so that `-w 2`
// bounds a cluster that does not answer at 2 s, not at the backend's own
// default. Nonblock does not shorten it: it is about a busy lock, not a
// slow network.
func (s *Spec) DialTimeout(def time.Duration) time.Duration {
	if s == nil || !s.WaitGiven || s.Wait <= 0 {
		return def
	}
	return min(def, s.Wait)
}

// SecondsToWait converts a wait in seconds, as flags and requests give it,
// into a duration. A positive wait too short to count in nanoseconds is
// kept positive: it bounds a wait, unlike zero, which means no wait.
func SecondsToWait(secs float64) time.Duration {
	d := time.Duration(secs * float64(time.Second))
	if d == 0 && secs > 0 {
		d = 1
	}
	return d
}

// Close releases what the protocol holds open (a network client), or,
// for a protocol kept for other requests (KeepSessions), ends this
// request's use of it.
func (r *Resolved) Close() {
	if release := r.release; release != nil {
		// Once: a second Close must not close the protocol the others
		// use.
		r.release = releasedKept
		release()
		return
	}
	CloseProtocol(r.Proto)
}

// releasedKept is the release of a Resolved whose use of a kept protocol
// has ended.
func releasedKept() {}

// Local reports whether the lock lives in this machine's filesystem (the
// kernel lock, the portable protocol), not behind a network client.
func (r *Resolved) Local() bool {
	_, network := r.Proto.(lock.Closer)
	return !network
}

// CloseProtocol closes p if it holds something open (a network client).
func CloseProtocol(p hold.Protocol) {
	if c, ok := p.(lock.Closer); ok {
		c.Close()
	}
}

// DebugEnv names the environment variable that turns on the library's
// debug events for any subcommand.
const DebugEnv = "HOLD_DEBUG"

// DebugOptions returns the option that sends the library's debug events
// (waiting, queued, acquired, released, lost, the protocol's steps) to
// stderr when HOLD_DEBUG is set to a true value ("1", "true", ...; "0",
// "false" and empty leave it off). Anything else set there turns it on
// too: someone who sets a debug variable wants to see something.
func DebugOptions() []hold.Option {
	v := os.Getenv(DebugEnv)
	if v == "" {
		return nil
	}
	if on, err := strconv.ParseBool(v); err == nil && !on {
		return nil
	}
	h := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
	return []hold.Option{hold.Logger(slog.New(h))}
}
