// Package doctor finds out, by experiment, whether hold's locks work on a
// filesystem: the check behind `hold doctor`, for a program to call at
// start-up before it trusts hold with its data:
//
//	rep, err := doctor.Check(ctx, dataDir, doctor.Config{})
//	if err != nil || rep.Verdict != doctor.Safe {
//		log.Fatalf("locks cannot be trusted in %s: %v %s", dataDir, err, rep.Summary)
//	}
//
// It is a package of its own, which package hold does not import, so that
// a program that never calls it does not link its probes.
//
// File locks fail silently more often than loudly: an NFS mount whose
// client keeps flock(2) locks to itself, a FUSE filesystem that ignores
// them, a file server whose clock is minutes off so that age-based
// staleness misfires. Each of these looks fine to the program taking the
// lock. Doctor runs small real experiments in a scratch directory (named
// ".hold-doctor-*", removed afterwards whatever happens, a cancelled
// context included) and turns them into a Report with a one-line verdict.
//
// The experiments, each a Probe in the report:
//
//   - filesystem: its type, and whether it is local, a network
//     filesystem or FUSE.
//   - lock-exclusive, lock-shared: a second, independent open of a lock
//     file (the Peer) must not get a lock the first holds exclusively,
//     shared locks must coexist and keep an exclusive one out.
//   - lock-flock-fcntl: whether flock(2) and POSIX fcntl locks conflict,
//     which on Linux shows that the kernel emulates flock with byte-range
//     locks, as NFS and SMB clients do to send them to the server.
//   - lock-released-on-exit: the kernel releases the lock of a process
//     that exits without unlocking (needs the peer to be a process).
//   - mkdir-atomic, create-exclusive, rename-atomic: what the portable
//     directory protocol and guarded updates build on.
//   - notify: whether a directory's removal is reported by the OS's change
//     notification (inotify...), so portable waiters can wake at once.
//   - clock: the filesystem's timestamp of a file just written against
//     this machine's clock.
//
// The second party of the lock experiments is, by default, a second open
// of the lock file in this process: kernel locks belong to the open file,
// so this tests what two processes would see, except the release of a
// lock by a process that exits. `hold doctor` uses a real second process
// (Config.NewPeer, StartPeer, ServePeer).
//
// Every source of a result (the peer, the clock, mkdir, O_EXCL create,
// rename, change notification) can be replaced through Config, which is
// how the tests show that each failure changes the report and the verdict
// as it should.
package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/hold-dev/hold/internal/fsinfo"
)

// Verdict is the answer to "is hold safe here": Safe, Unsafe or Unknown.
type Verdict string

// The verdicts.
const (
	// Safe: the probes show the protocol works here.
	Safe Verdict = "safe"
	// Unsafe: a probe showed the protocol does not exclude, or cannot
	// be trusted here.
	Unsafe Verdict = "unsafe"
	// Unknown: doctor could not tell, because a probe could not run or
	// because what matters (other machines) cannot be seen from here.
	Unknown Verdict = "unknown"
)

// ExitStatus is the exit status `hold doctor` uses for the verdict: 0 safe,
// 1 unsafe, 2 could not tell.
func (v Verdict) ExitStatus() int {
	switch v {
	case Safe:
		return 0
	case Unsafe:
		return 1
	}
	return 2
}

// Result is the outcome of one probe.
type Result string

// The results.
const (
	// Pass: the probe saw what hold needs.
	Pass Result = "pass"
	// Warn: hold works, but worse or with a caveat (no change
	// notification, a clock a little off, locks that reach other machines
	// only through the server).
	Warn Result = "warn"
	// Fail: the probe saw what hold needs not to hold.
	Fail Result = "fail"
	// Error: the probe could not be carried out.
	Error Result = "error"
	// Skip: the probe does not apply here.
	Skip Result = "skip"
)

// Probe is the outcome of one experiment.
type Probe struct {
	// Name identifies the probe: "lock-exclusive", "clock", ... (see the
	// package documentation).
	Name string `json:"name"`
	// Result is pass, warn, fail, error or skip.
	Result Result `json:"result"`
	// Detail says what was seen, in a sentence.
	Detail string `json:"detail"`
	// Millis is how long the probe took, in milliseconds.
	Millis float64 `json:"ms"`
}

// Assessment is the verdict on one protocol.
type Assessment struct {
	// Protocol is "flock" (kernel locks, hold's default) or "dir" (the
	// portable directory protocol).
	Protocol string `json:"protocol"`
	// Verdict is safe, unsafe or unknown.
	Verdict Verdict `json:"verdict"`
	// Reason says why, in a phrase.
	Reason string `json:"reason"`
}

// Note is a finding about one use of the filesystem that is not a
// protocol's mutual exclusion.
type Note struct {
	// About names what the finding matters to: NoteUpdate (readers that
	// do not take the lock while `hold update` replaces a file) or
	// NoteWaiting (how soon portable-protocol waiters see a release).
	About string `json:"about"`
	// Detail says what was seen and what it means, in a sentence.
	Detail string `json:"detail"`
}

// The subjects of notes.
const (
	NoteUpdate  = "update"
	NoteWaiting = "waiting"
)

// Report is what a doctor run found.
type Report struct {
	// Path is the directory that was checked, made absolute.
	Path string `json:"path"`
	// OS is the operating system doctor ran on (runtime.GOOS); the
	// meaning of some probes depends on it.
	OS string `json:"os"`
	// Filesystem identifies the filesystem holding Path.
	Filesystem Filesystem `json:"filesystem"`
	// fs is Filesystem with what the verdict reasons from (its class).
	fs fsinfo.Filesystem
	// SecondProcess is true when the second party of the lock probes was
	// a separate process, false when it was a second open in this one.
	SecondProcess bool `json:"second_process"`
	// Probes are the experiments, in the order they ran.
	Probes []Probe `json:"probes"`
	// FlockFcntlInteract says whether flock(2) and fcntl locks conflicted
	// (nil when that was not measured).
	FlockFcntlInteract *bool `json:"flock_fcntl_interact,omitempty"`
	// ClockSkewMillis is the filesystem's timestamp of a file just
	// written minus this machine's clock, in milliseconds (nil when not
	// measured). Negative: the filesystem's clock is behind.
	ClockSkewMillis *float64 `json:"clock_skew_ms,omitempty"`
	// Assessments judge each filesystem protocol: flock, then dir. Each
	// rests only on the probes that protocol needs.
	Assessments []Assessment `json:"assessments"`
	// Notes are findings that matter to something other than a
	// protocol's exclusion: readers that do not lock during `hold
	// update`, how fast waiters wake.
	Notes []Note `json:"notes,omitempty"`
	// Protocol is the protocol hold uses here, which Verdict is about.
	Protocol string `json:"protocol"`
	// Verdict says whether Protocol is safe here.
	Verdict Verdict `json:"verdict"`
	// Recommended is the first safe protocol of flock and dir; empty
	// when neither is.
	Recommended string `json:"recommended,omitempty"`
	// Summary is the verdict in one line.
	Summary string `json:"summary"`
	// Millis is how long the whole run took, in milliseconds.
	Millis float64 `json:"ms"`
}

// Probe returns the probe named name, or nil if it did not run.
func (r *Report) Probe(name string) *Probe {
	for i := range r.Probes {
		if r.Probes[i].Name == name {
			return &r.Probes[i]
		}
	}
	return nil
}

// Assessment returns the assessment of protocol, or nil.
func (r *Report) Assessment(protocol string) *Assessment {
	for i := range r.Assessments {
		if r.Assessments[i].Protocol == protocol {
			return &r.Assessments[i]
		}
	}
	return nil
}

// The probe names.
const (
	ProbeFilesystem    = "filesystem"
	ProbeLockExclusive = "lock-exclusive"
	ProbeLockShared    = "lock-shared"
	ProbeFlockFcntl    = "lock-flock-fcntl"
	ProbeLockExit      = "lock-released-on-exit"
	ProbeMkdir         = "mkdir-atomic"
	ProbeCreateExcl    = "create-exclusive"
	ProbeRename        = "rename-atomic"
	ProbeNotify        = "notify"
	ProbeClock         = "clock"
)

// Config adjusts a run. The zero value checks the flock protocol with an
// in-process peer and the real filesystem, clock and notification; the
// function fields let a test inject failures (this package's own tests
// also replace the filesystem's identification).
type Config struct {
	// Protocol is the protocol the verdict is about: "flock" (the
	// default) or "dir". Another name ("etcd") does not use the
	// filesystem, and gets the verdict Unknown.
	Protocol string
	// NewPeer starts the second party of the lock probes. Default: a
	// second open in this process (NewLocalPeer). `hold doctor` starts a
	// process (StartPeer).
	NewPeer func(ctx context.Context, scratch string) (Peer, error)
	// Now is this machine's clock. Default time.Now.
	Now func() time.Time
	// Mkdir creates a directory, failing if it exists. Default os.Mkdir.
	Mkdir func(path string) error
	// CreateExclusive creates a file with O_CREATE|O_EXCL. Default: that.
	CreateExclusive func(path string) error
	// Rename renames, replacing newpath. Default os.Rename.
	Rename func(oldpath, newpath string) error
	// Watch starts watching a directory for removals. Default: fsnotify.
	Watch func(dir string) (Watcher, error)
	// NotifyTimeout bounds the wait for a removal event. Default 1s;
	// inotify delivers in well under a millisecond.
	NotifyTimeout time.Duration
	// AfterProbe, if set, is called after each probe with its name. A
	// test uses it to interrupt a run at a known point.
	AfterProbe func(ctx context.Context, name string)

	// statFS identifies the filesystem holding a directory (statfs,
	// /proc/self/mountinfo, GetVolumeInformation); the tests claim
	// filesystems they cannot mount through it.
	statFS func(dir string) (fsinfo.Filesystem, error)
}

func (c Config) withDefaults() Config {
	if c.Protocol == "" {
		c.Protocol = "flock"
	}
	if c.NewPeer == nil {
		c.NewPeer = func(context.Context, string) (Peer, error) { return NewLocalPeer(), nil }
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Mkdir == nil {
		c.Mkdir = func(p string) error { return os.Mkdir(p, 0o755) }
	}
	if c.CreateExclusive == nil {
		c.CreateExclusive = createExclusive
	}
	if c.Rename == nil {
		c.Rename = os.Rename
	}
	if c.Watch == nil {
		c.Watch = watchDir
	}
	if c.statFS == nil {
		c.statFS = fsinfo.Stat
	}
	if c.NotifyTimeout <= 0 {
		c.NotifyTimeout = time.Second
	}
	return c
}

func createExclusive(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// run is the state of one doctor run.
type run struct {
	cfg     Config
	scratch string
	peer    Peer
	report  *Report
}

// Check checks dir and returns the report. It works in a scratch directory
// inside dir (".hold-doctor-*") and takes well under a second on a local
// disk. The verdict is about cfg.Protocol (the kernel lock, "flock", by
// default); the report judges the portable directory protocol, "dir", too.
//
// The report is never nil. The error is non-nil when the run could not be
// done (dir is missing, not a directory or not writable: no scratch
// directory) or was cut short by ctx; the report so far then comes with
// it, its verdict Unknown and its summary saying why, so that a caller may
// print rep.Summary whatever happened. The scratch directory is removed in
// every case; if that fails, the error says so.
func Check(ctx context.Context, dir string, cfg Config) (rep *Report, err error) {
	start := time.Now()
	cfg = cfg.withDefaults()
	// What a run that cannot start reports: nothing was probed.
	cannot := func(err error) (*Report, error) {
		rep := &Report{Path: dir, OS: runtime.GOOS, Protocol: cfg.Protocol, Verdict: Unknown,
			Summary: "could not tell: " + err.Error(), Millis: ms(time.Since(start))}
		if abs, aerr := filepath.Abs(dir); aerr == nil {
			rep.Path = abs
		}
		return rep, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return cannot(err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return cannot(err)
	}
	if !fi.IsDir() {
		return cannot(fmt.Errorf("%s is not a directory", dir))
	}
	if err := ctx.Err(); err != nil {
		return cannot(err)
	}
	scratch, err := os.MkdirTemp(abs, scratchPrefix)
	if err != nil {
		return cannot(fmt.Errorf("cannot create a scratch directory in %s: %w", dir, err))
	}
	r := &run{cfg: cfg, scratch: scratch, report: &Report{Path: abs, OS: runtime.GOOS, Protocol: cfg.Protocol}}
	// Registered first, so it runs last, after the peer and every probe
	// have let go of their files (Windows cannot remove open files).
	defer func() {
		if rerr := os.RemoveAll(scratch); rerr != nil {
			err = errors.Join(err, fmt.Errorf("removing the scratch directory: %w", rerr))
		}
		rep.Millis = ms(time.Since(start))
	}()

	r.probe(ctx, ProbeFilesystem, r.probeFilesystem)
	peer, perr := cfg.NewPeer(ctx, scratch)
	if perr == nil {
		r.peer = peer
		r.report.SecondProcess = peer.Separate()
		defer peer.Close()
	}
	steps := []struct {
		name string
		fn   func(context.Context) (Result, string)
	}{
		{ProbeLockExclusive, r.probeExclusive},
		{ProbeLockShared, r.probeShared},
		{ProbeFlockFcntl, r.probeFlockFcntl},
		{ProbeLockExit, r.probeReleasedOnExit},
		{ProbeMkdir, r.probeMkdir},
		{ProbeCreateExcl, r.probeCreateExclusive},
		{ProbeRename, r.probeRename},
		{ProbeNotify, r.probeNotify},
		{ProbeClock, r.probeClock},
	}
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			r.interrupted()
			return r.report, err
		}
		if r.peer == nil && needsPeer(s.name) {
			r.add(s.name, Error, "could not start the second party: "+perr.Error(), 0)
			continue
		}
		fn := s.fn
		r.probe(ctx, s.name, func() (Result, string) { return fn(ctx) })
	}
	if err := ctx.Err(); err != nil {
		r.interrupted()
		return r.report, err
	}
	decide(r.report)
	return r.report, nil
}

func needsPeer(name string) bool {
	switch name {
	case ProbeLockExclusive, ProbeLockShared, ProbeFlockFcntl, ProbeLockExit, ProbeMkdir:
		return true
	}
	return false
}

// interrupted marks a report cut short.
func (r *run) interrupted() {
	r.report.Verdict = Unknown
	r.report.Summary = "could not tell: the check was interrupted"
}

func (r *run) probe(ctx context.Context, name string, fn func() (Result, string)) {
	start := time.Now()
	res, detail := fn()
	r.add(name, res, detail, time.Since(start))
	if r.cfg.AfterProbe != nil {
		r.cfg.AfterProbe(ctx, name)
	}
}

func (r *run) add(name string, res Result, detail string, d time.Duration) {
	r.report.Probes = append(r.report.Probes, Probe{Name: name, Result: res, Detail: detail, Millis: ms(d)})
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
