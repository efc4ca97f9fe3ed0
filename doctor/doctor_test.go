package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/fsinfo"
)

// peerEnv makes the test binary act as a doctor peer process: its value is
// the scratch directory.
const peerEnv = "HOLD_DOCTOR_TEST_PEER"

func TestMain(m *testing.M) {
	if scratch, ok := os.LookupEnv(peerEnv); ok {
		if err := ServePeer(scratch, os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString("peer: " + err.Error() + "\n")
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// processPeer starts this test binary as a peer process.
func processPeer(ctx context.Context, scratch string) (Peer, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), peerEnv+"="+scratch)
	cmd.Stderr = os.Stderr
	return StartPeer(ctx, cmd)
}

// runIn runs doctor on a fresh directory with cfg and checks that the
// scratch directory is gone afterwards, whatever happened.
func runIn(t *testing.T, ctx context.Context, cfg Config) (*Report, error) {
	t.Helper()
	if cfg.NotifyTimeout == 0 {
		cfg.NotifyTimeout = patient
	}
	dir := t.TempDir()
	rep, err := Check(ctx, dir, cfg)
	assertNoScratch(t, dir)
	return rep, err
}

func assertNoScratch(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind in %s: %s", dir, e.Name())
	}
}

func mustRun(t *testing.T, cfg Config) *Report {
	t.Helper()
	rep, err := runIn(t, context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

func probeResult(t *testing.T, rep *Report, name string) Result {
	t.Helper()
	p := rep.Probe(name)
	if p == nil {
		t.Fatalf("probe %s missing from %+v", name, rep.Probes)
	}
	return p.Result
}

func dump(t *testing.T, rep *Report) {
	t.Helper()
	b, _ := json.MarshalIndent(rep, "", "  ")
	t.Logf("report:\n%s", b)
}

// allPass checks that every probe passed except those listed with another
// expected result.
func allPass(t *testing.T, rep *Report, except map[string]Result) {
	t.Helper()
	for _, p := range rep.Probes {
		want := Pass
		if r, ok := except[p.Name]; ok {
			want = r
		}
		if p.Result != want {
			t.Errorf("probe %s: %s (%s), want %s", p.Name, p.Result, p.Detail, want)
		}
	}
}

// localSkips are the probes that skip on a local file system: the library's
// check runs no second process, and Windows has one kind of file lock, so
// flock(2) and fcntl locks have nothing to conflict about there.
func localSkips() map[string]Result {
	m := map[string]Result{ProbeLockExit: Skip}
	if runtime.GOOS == "windows" {
		m[ProbeFlockFcntl] = Skip
	}
	return m
}

// patient is the notification bound for tests that expect the event: it
// arrives within a millisecond, but a loaded machine may be slow to run
// the goroutine that reads it.
const patient = 10 * time.Second

func TestLocalFilesystemIsSafe(t *testing.T) {
	rep := mustRun(t, Config{NotifyTimeout: patient})
	if testing.Verbose() {
		dump(t, rep)
	}
	if !rep.Filesystem.Known || rep.Filesystem.Network || rep.Filesystem.FUSE {
		t.Skipf("the test directory is on %+v, not a local filesystem", rep.Filesystem)
	}
	allPass(t, rep, localSkips())
	if rep.Verdict != Safe || rep.Protocol != "flock" || rep.Recommended != "flock" {
		t.Errorf("verdict %s for %s (recommended %q), want safe flock: %s", rep.Verdict, rep.Protocol, rep.Recommended, rep.Summary)
	}
	if a := rep.Assessment("dir"); a == nil || a.Verdict != Safe {
		t.Errorf("dir assessment %+v, want safe", a)
	}
	if rep.SecondProcess {
		t.Error("SecondProcess set for an in-process peer")
	}
	if rep.OS == "linux" && (rep.FlockFcntlInteract == nil || *rep.FlockFcntlInteract) {
		t.Errorf("flock/fcntl interaction %v on a local Linux filesystem, want independent", rep.FlockFcntlInteract)
	}
	if rep.ClockSkewMillis == nil {
		t.Error("clock skew not measured")
	}
	if !strings.HasPrefix(rep.Summary, "safe: hold uses flock here") {
		t.Errorf("summary %q", rep.Summary)
	}
	if rep.Verdict.ExitStatus() != 0 {
		t.Errorf("exit status %d", rep.Verdict.ExitStatus())
	}
}

// TestTmpfsIsSafe runs on a memory filesystem too, where there is one
// (/dev/shm on Linux).
func TestTmpfsIsSafe(t *testing.T) {
	base := "/dev/shm"
	// (Under wine, Windows' /dev/shm is Linux's, seen as a drive's
	// subdirectory: no file system of its own.)
	if fi, err := os.Stat(base); runtime.GOOS != "linux" || err != nil || !fi.IsDir() {
		t.Skip("no /dev/shm here")
	}
	dir, err := os.MkdirTemp(base, "hold-doctor-test-")
	if err != nil {
		t.Skipf("cannot write to %s: %v", base, err)
	}
	defer os.RemoveAll(dir)
	rep, err := Check(context.Background(), dir, Config{NotifyTimeout: patient})
	if err != nil {
		t.Fatal(err)
	}
	assertNoScratch(t, dir)
	if rep.Filesystem.Type != "tmpfs" {
		t.Errorf("filesystem type %q, want tmpfs", rep.Filesystem.Type)
	}
	allPass(t, rep, localSkips())
	if rep.Verdict != Safe {
		t.Errorf("verdict %s: %s", rep.Verdict, rep.Summary)
	}
}

// TestSecondProcess uses a real second process as the peer, as `hold
// doctor` does, which adds the released-on-exit probe.
func TestSecondProcess(t *testing.T) {
	rep := mustRun(t, Config{NewPeer: processPeer, NotifyTimeout: patient})
	if testing.Verbose() {
		dump(t, rep)
	}
	if !rep.SecondProcess {
		t.Error("SecondProcess not set")
	}
	if rep.Filesystem.Network || rep.Filesystem.FUSE || !rep.Filesystem.Known {
		t.Skipf("not a local filesystem: %+v", rep.Filesystem)
	}
	skips := localSkips()
	delete(skips, ProbeLockExit) // a second process runs it
	allPass(t, rep, skips)
	if rep.Verdict != Safe {
		t.Errorf("verdict %s: %s", rep.Verdict, rep.Summary)
	}
	if d := rep.Probe(ProbeLockExclusive).Detail; !strings.Contains(d, "a second process") {
		t.Errorf("detail does not say the peer was a process: %q", d)
	}
}

// grantingPeer is a second party that gets every lock: what a filesystem
// whose locks exclude nobody looks like.
type grantingPeer struct{ Peer }

func (p grantingPeer) Do(ctx context.Context, op Op, path string) (Answer, error) {
	switch op {
	case OpFlockExclusive, OpFlockShared, OpFcntlWrite:
		return Granted, nil
	}
	return p.Peer.Do(ctx, op, path)
}

// denyingPeer never gets a lock: what a lock stuck busy looks like.
type denyingPeer struct{ Peer }

func (p denyingPeer) Do(ctx context.Context, op Op, path string) (Answer, error) {
	switch op {
	case OpFlockExclusive, OpFlockShared, OpFcntlWrite:
		return Denied, nil
	}
	return p.Peer.Do(ctx, op, path)
}

func TestNoExclusionIsUnsafe(t *testing.T) {
	rep := mustRun(t, Config{NewPeer: func(context.Context, string) (Peer, error) {
		return grantingPeer{NewLocalPeer()}, nil
	}})
	if got := probeResult(t, rep, ProbeLockExclusive); got != Fail {
		t.Errorf("lock-exclusive: %s", got)
	}
	if got := probeResult(t, rep, ProbeLockShared); got != Fail {
		t.Errorf("lock-shared: %s", got)
	}
	if rep.Verdict != Unsafe || rep.Verdict.ExitStatus() != 1 {
		t.Fatalf("verdict %s (exit %d), want unsafe (exit 1): %s", rep.Verdict, rep.Verdict.ExitStatus(), rep.Summary)
	}
	if !strings.HasPrefix(rep.Summary, "UNSAFE: hold uses flock here; kernel locks do not work") {
		t.Errorf("summary %q", rep.Summary)
	}
	// The portable protocol does not depend on kernel locks; where it
	// works the summary points to it.
	if rep.Recommended != "dir" || !strings.Contains(rep.Summary, "--protocol dir is safe here") {
		t.Errorf("recommended %q, summary %q", rep.Recommended, rep.Summary)
	}
}

func TestLockStuckBusyIsUnsafe(t *testing.T) {
	rep := mustRun(t, Config{NewPeer: func(context.Context, string) (Peer, error) {
		return denyingPeer{NewLocalPeer()}, nil
	}})
	p := rep.Probe(ProbeLockExclusive)
	if p.Result != Fail || !strings.Contains(p.Detail, "stayed busy") {
		t.Errorf("lock-exclusive: %+v", p)
	}
	if rep.Verdict != Unsafe {
		t.Errorf("verdict %s", rep.Verdict)
	}
}

// TestLockNotReleasedOnExit injects a lock that outlives its holder's
// exit: just before the peer process exits, a third party takes the lock
// over, so to the probe the lock stays held after the exit, which is what
// a filesystem that does not release a dead holder's locks looks like.
func TestLockNotReleasedOnExit(t *testing.T) {
	rep := mustRun(t, Config{NewPeer: func(ctx context.Context, scratch string) (Peer, error) {
		p, err := processPeer(ctx, scratch)
		if err != nil {
			return nil, err
		}
		return &undyingPeer{Peer: p}, nil
	}})
	p := rep.Probe(ProbeLockExit)
	if p.Result != Fail || !strings.Contains(p.Detail, "stayed held") {
		t.Errorf("lock-released-on-exit: %+v", p)
	}
	if rep.Verdict != Unsafe {
		t.Errorf("verdict %s", rep.Verdict)
	}
}

// undyingPeer answers OpExit but keeps the lock: it takes it again from
// this process before the real peer exits.
type undyingPeer struct {
	Peer
	path string
	keep *os.File
}

func (p *undyingPeer) Do(ctx context.Context, op Op, path string) (Answer, error) {
	switch op {
	case OpFlockExclusive:
		p.path = path
	case OpExit:
		// Let a third party, in this process, keep the lock across the
		// peer's exit.
		keeper := NewLocalPeer()
		a, err := p.Peer.Do(ctx, OpRelease, "")
		if err != nil {
			return a, err
		}
		if a, err := keeper.Do(ctx, OpFlockExclusive, p.path); err != nil || a != Granted {
			return a, errors.Join(err, errors.New("keeper did not get the lock"))
		}
		p.Peer = &closingPeer{Peer: p.Peer, keeper: keeper}
	}
	return p.Peer.Do(ctx, op, path)
}

type closingPeer struct {
	Peer
	keeper Peer
}

func (p *closingPeer) Close() error { return errors.Join(p.keeper.Close(), p.Peer.Close()) }

func TestSkewedClock(t *testing.T) {
	// This machine's clock 30 s ahead: the filesystem's is 30 s behind,
	// and heartbeats would look 30 s old when fresh.
	ahead := func() time.Time { return time.Now().Add(30 * time.Second) }
	rep := mustRun(t, Config{Now: ahead})
	p := rep.Probe(ProbeClock)
	if p.Result != Fail || !strings.Contains(p.Detail, "behind") {
		t.Errorf("clock: %+v", p)
	}
	if rep.ClockSkewMillis == nil || *rep.ClockSkewMillis > -29000 {
		t.Errorf("skew %v ms, want about -30000", rep.ClockSkewMillis)
	}
	// Kernel locks do not read clocks: flock stays safe, dir does not.
	if rep.Verdict != Safe {
		t.Errorf("flock verdict %s: %s", rep.Verdict, rep.Summary)
	}
	if a := rep.Assessment("dir"); a.Verdict != Unsafe {
		t.Errorf("dir assessment %+v", a)
	}
	repDir := mustRun(t, Config{Now: ahead, Protocol: "dir"})
	if repDir.Verdict != Unsafe || repDir.Verdict.ExitStatus() != 1 || !strings.HasPrefix(repDir.Summary, "UNSAFE: hold uses dir here") {
		t.Errorf("dir verdict %s: %s", repDir.Verdict, repDir.Summary)
	}

	// A small skew, or the filesystem ahead, only warns.
	behind := func() time.Time { return time.Now().Add(-5 * time.Second) }
	rep = mustRun(t, Config{Now: behind, Protocol: "dir"})
	if p := rep.Probe(ProbeClock); p.Result != Warn || !strings.Contains(p.Detail, "ahead") {
		t.Errorf("clock: %+v", p)
	}
	if rep.Verdict != Safe || !strings.Contains(rep.Summary, "warnings: clock") {
		t.Errorf("verdict %s: %s", rep.Verdict, rep.Summary)
	}
}

// silentWatcher never reports anything, like inotify on changes another
// machine made.
type silentWatcher struct{ c chan string }

func (w silentWatcher) Removed() <-chan string { return w.c }
func (w silentWatcher) Close() error           { return nil }

func TestNoEvents(t *testing.T) {
	for _, proto := range []string{"flock", "dir"} {
		rep := mustRun(t, Config{
			Protocol:      proto,
			NotifyTimeout: 50 * time.Millisecond,
			Watch:         func(string) (Watcher, error) { return silentWatcher{make(chan string)}, nil },
		})
		p := rep.Probe(ProbeNotify)
		if p.Result != Warn || !strings.Contains(p.Detail, "no removal event") {
			t.Errorf("notify: %+v", p)
		}
		// Without events portable waiters poll: slower, not unsafe.
		if rep.Verdict != Safe || rep.Verdict.ExitStatus() != 0 || !strings.Contains(rep.Summary, "warnings: notify") {
			t.Errorf("%s: verdict %s: %s", proto, rep.Verdict, rep.Summary)
		}
	}
	rep := mustRun(t, Config{Watch: func(string) (Watcher, error) { return nil, errors.New("no inotify instances left") }})
	if p := rep.Probe(ProbeNotify); p.Result != Warn || !strings.Contains(p.Detail, "no inotify instances left") {
		t.Errorf("notify: %+v", p)
	}
}

func TestNonAtomicMkdir(t *testing.T) {
	// MkdirAll succeeds for everyone: no mutual exclusion at all.
	rep := mustRun(t, Config{Protocol: "dir", Mkdir: func(p string) error { return os.MkdirAll(p, 0o755) }})
	p := rep.Probe(ProbeMkdir)
	if p.Result != Fail || !strings.Contains(p.Detail, "racers created the same directory") {
		t.Errorf("mkdir: %+v", p)
	}
	if rep.Verdict != Unsafe || rep.Verdict.ExitStatus() != 1 {
		t.Errorf("verdict %s: %s", rep.Verdict, rep.Summary)
	}
	if a := rep.Assessment("flock"); a.Verdict != Safe {
		t.Errorf("flock assessment %+v: kernel locks do not depend on mkdir", a)
	}
	if rep.Recommended != "flock" || !strings.Contains(rep.Summary, "--protocol flock is safe here") {
		t.Errorf("summary %q", rep.Summary)
	}
}

func TestNonExclusiveCreate(t *testing.T) {
	create := func(p string) error {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	}
	rep := mustRun(t, Config{Protocol: "dir", CreateExclusive: create})
	p := rep.Probe(ProbeCreateExcl)
	if p.Result != Fail || !strings.Contains(p.Detail, "already existed") {
		t.Errorf("create-exclusive: %+v", p)
	}
	if rep.Verdict != Unsafe {
		t.Errorf("verdict %s", rep.Verdict)
	}
}

func TestRenameThatDoesNotReplace(t *testing.T) {
	rename := func(o, n string) error {
		if _, err := os.Lstat(n); err == nil {
			return &os.LinkError{Op: "rename", Old: o, New: n, Err: os.ErrExist}
		}
		return os.Rename(o, n)
	}
	rep := mustRun(t, Config{Protocol: "dir", Rename: rename})
	p := rep.Probe(ProbeRename)
	if p.Result != Fail || !strings.Contains(p.Detail, "renaming over an existing file failed") {
		t.Errorf("rename: %+v", p)
	}
	checkRenameIsANote(t, rep)
}

// checkRenameIsANote checks that a failed rename probe does not decide the
// portable protocol's verdict, which rests on mkdir and O_EXCL, and is
// reported as a note about `hold update` instead.
func checkRenameIsANote(t *testing.T, rep *Report) {
	t.Helper()
	if local := rep.Filesystem.Known && !rep.Filesystem.Network && !rep.Filesystem.FUSE; local && rep.Verdict != Safe {
		t.Errorf("verdict %s on %s: %s", rep.Verdict, rep.Filesystem, rep.Summary)
	}
	if len(rep.Notes) == 0 || rep.Notes[0].About != NoteUpdate || !strings.Contains(rep.Notes[0].Detail, "hold update") {
		t.Errorf("notes %+v, want one about update", rep.Notes)
	}
}

func TestRenameWithAGap(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no concurrent reader on Windows")
	}
	// Remove, then rename: for a moment the target does not exist. The
	// gap is long so the reader cannot miss it however loaded the
	// machine is.
	rename := func(o, n string) error {
		os.Remove(n)
		time.Sleep(100 * time.Millisecond)
		return os.Rename(o, n)
	}
	rep := mustRun(t, Config{Protocol: "dir", Rename: rename})
	p := rep.Probe(ProbeRename)
	if p.Result != Fail || !strings.Contains(p.Detail, "unreadable during a rename") {
		t.Errorf("rename: %+v", p)
	}
	checkRenameIsANote(t, rep)
}

func TestPeerThatCannotStart(t *testing.T) {
	rep := mustRun(t, Config{NewPeer: func(context.Context, string) (Peer, error) {
		return nil, errors.New("exec: no such file")
	}})
	if got := probeResult(t, rep, ProbeLockExclusive); got != Error {
		t.Errorf("lock-exclusive: %s", got)
	}
	if rep.Verdict != Unknown || rep.Verdict.ExitStatus() != 2 || !strings.HasPrefix(rep.Summary, "could not tell") {
		t.Errorf("verdict %s: %s", rep.Verdict, rep.Summary)
	}
}

func TestUnknownProtocol(t *testing.T) {
	rep := mustRun(t, Config{Protocol: "etcd"})
	if rep.Verdict != Unknown || rep.Recommended != "flock" {
		t.Errorf("verdict %s, recommended %q: %s", rep.Verdict, rep.Recommended, rep.Summary)
	}
}

// fakeFS wraps the real identification but claims another filesystem, so
// the verdict's reasoning about network filesystems can be exercised with
// real probes.
func fakeFS(typ, localLock string) func(string) (fsinfo.Filesystem, error) {
	return func(string) (fsinfo.Filesystem, error) {
		opts := ""
		if localLock != "" {
			opts = "local_lock=" + localLock
		}
		return fsinfo.Describe(typ, "", opts), nil
	}
}

// fakeFSOpts claims a filesystem of type typ mounted with options.
func fakeFSOpts(typ, options string) func(string) (fsinfo.Filesystem, error) {
	return func(string) (fsinfo.Filesystem, error) { return fsinfo.Describe(typ, "", options), nil }
}

// mirrorFS claims a FUSE filesystem without a subtype (bindfs) whose source
// is a directory on a filesystem of type typ.
func mirrorFS(typ string) func(string) (fsinfo.Filesystem, error) {
	return func(string) (fsinfo.Filesystem, error) {
		fs := fsinfo.Describe("fuse", "/srv/base", "rw")
		m := fsinfo.Describe(typ, "/dev/sda1", "rw")
		fs.Mirror = &m
		return fs, nil
	}
}

// fcntlConflictPeer makes POSIX locks conflict with flock, as an NFS
// client's emulation does.
type fcntlConflictPeer struct{ Peer }

func (p fcntlConflictPeer) Do(ctx context.Context, op Op, path string) (Answer, error) {
	if op == OpFcntlWrite {
		return Denied, nil
	}
	return p.Peer.Do(ctx, op, path)
}

func TestNetworkFilesystems(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the flock/fcntl reasoning is about Linux")
	}
	emulating := func(context.Context, string) (Peer, error) { return fcntlConflictPeer{NewLocalPeer()}, nil }
	cases := []struct {
		name      string
		fs        func(string) (fsinfo.Filesystem, error)
		peer      func(context.Context, string) (Peer, error)
		flock     Verdict
		dir       Verdict
		wantWords string
	}{
		{"nfs local_lock=flock", fakeFS("nfs4", "flock"), nil, Unsafe, Safe, "keeps flock locks to this machine"},
		{"nfs local_lock=all", fakeFS("nfs", "all"), emulating, Unsafe, Safe, "keeps flock locks to this machine"},
		{"nfs no interaction", fakeFS("nfs4", "none"), nil, Unsafe, Safe, "stay in this machine's kernel"},
		{"nfs emulated", fakeFS("nfs4", "none"), emulating, Safe, Safe, "sends flock locks to the server"},
		{"cifs emulated", fakeFS("cifs", ""), emulating, Safe, Safe, "sends flock locks to the server"},
		{"sshfs", fakeFS("fuse.sshfs", ""), nil, Unknown, Safe, "FUSE daemon"},
		{"s3fs", fakeFS("fuse.s3fs", ""), nil, Unknown, Unknown, "FUSE daemon"},
		{"bindfs over ext4", mirrorFS("ext4"), nil, Unknown, Safe, "FUSE daemon"},
		{"bindfs over s3fs", mirrorFS("fuse.s3fs"), nil, Unknown, Unknown, "FUSE daemon"},
		{"nfs nolock", fakeFSOpts("nfs", "nolock"), nil, Unsafe, Safe, "nolock keeps locks on this machine"},
		{"cifs nobrl", fakeFSOpts("cifs", "nobrl"), emulating, Unsafe, Safe, "nobrl"},
		{"fuse-overlayfs", fakeFS("fuse.fuse-overlayfs", ""), nil, Safe, Safe, "local filesystem"},
		{"9p", fakeFS("9p", ""), nil, Unknown, Safe, "cannot be tested from here"},
		{"unknown", fakeFS("weirdfs", ""), nil, Unknown, Unknown, "not a filesystem doctor knows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := mustRun(t, Config{statFS: c.fs, NewPeer: c.peer})
			if testing.Verbose() {
				dump(t, rep)
			}
			if a := rep.Assessment("flock"); a.Verdict != c.flock || !strings.Contains(a.Reason, c.wantWords) {
				t.Errorf("flock: %+v, want %s with %q", a, c.flock, c.wantWords)
			}
			if a := rep.Assessment("dir"); a.Verdict != c.dir {
				t.Errorf("dir: %+v, want %s", a, c.dir)
			}
			if rep.Verdict != c.flock {
				t.Errorf("verdict %s", rep.Verdict)
			}
		})
	}
}

func TestCancelledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := runIn(t, ctx, Config{})
	// The report comes with the error, for a caller that prints its
	// summary either way; nothing was probed.
	if !errors.Is(err, context.Canceled) || rep == nil || rep.Verdict != Unknown || len(rep.Probes) != 0 ||
		!strings.Contains(rep.Summary, "could not tell") {
		t.Fatalf("Check = %+v, %v; want an unknown verdict with no probes, and context.Canceled", rep, err)
	}
}

// TestCancelledMidway interrupts the run after each probe in turn: the
// run stops there, says so, and leaves nothing behind.
func TestCancelledMidway(t *testing.T) {
	names := []string{ProbeFilesystem, ProbeLockExclusive, ProbeLockShared, ProbeFlockFcntl, ProbeLockExit,
		ProbeMkdir, ProbeCreateExcl, ProbeRename, ProbeNotify, ProbeClock}
	// With a process peer (slower to start) at the points where it holds
	// locks or is about to exit.
	withProcess := map[string]bool{ProbeLockExclusive: true, ProbeLockExit: true, ProbeMkdir: true}
	for _, stopAfter := range names {
		for _, peer := range []string{"local", "process"} {
			if peer == "process" && !withProcess[stopAfter] {
				continue
			}
			t.Run(stopAfter+"/"+peer, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				cfg := Config{AfterProbe: func(_ context.Context, name string) {
					if name == stopAfter {
						cancel()
					}
				}}
				if peer == "process" {
					cfg.NewPeer = processPeer
				}
				rep, err := runIn(t, ctx, cfg)
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("err = %v, want context.Canceled", err)
				}
				if rep.Verdict != Unknown || rep.Verdict.ExitStatus() != 2 {
					t.Errorf("verdict %s", rep.Verdict)
				}
				if last := rep.Probes[len(rep.Probes)-1].Name; last != stopAfter {
					t.Errorf("last probe %s, want %s", last, stopAfter)
				}
			})
		}
	}
}

// blockingPeer never answers a lock request until its context ends, like
// a peer stuck on an unresponsive file server.
type blockingPeer struct{ Peer }

func (p blockingPeer) Do(ctx context.Context, op Op, path string) (Answer, error) {
	if op == OpFlockExclusive {
		<-ctx.Done()
		return "", ctx.Err()
	}
	return p.Peer.Do(ctx, op, path)
}

func TestCancelledWhileAProbeWaits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	cfg := Config{NewPeer: func(context.Context, string) (Peer, error) {
		once.Do(func() { time.AfterFunc(20*time.Millisecond, cancel) })
		return blockingPeer{NewLocalPeer()}, nil
	}}
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		_, err = runIn(t, ctx, cfg)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context was cancelled")
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
}

// TestKilledDoctorLeavesNothing: when the doctor process dies without a
// word, its peer process removes the scratch directory.
func TestKilledDoctorLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	scratch, err := os.MkdirTemp(dir, scratchPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scratch, "x.lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), peerEnv+"="+scratch)
	p, err := StartPeer(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := p.Do(context.Background(), OpFlockExclusive, filepath.Join(scratch, "x.lock")); err != nil || a != Granted {
		t.Fatalf("peer lock: %v %v", a, err)
	}
	// What a SIGKILL of the doctor does to the peer: its stdin closes
	// without "bye".
	pp := p.(*procPeer)
	pp.stdin.Close()
	select {
	case <-pp.done:
	case <-time.After(10 * time.Second):
		t.Fatal("peer did not exit when its doctor went away")
	}
	assertNoScratch(t, dir)

	// And it never removes a directory that is not a doctor's scratch.
	other := t.TempDir()
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), peerEnv+"="+other)
	p, err = StartPeer(context.Background(), cmd)
	if err != nil {
		t.Fatal(err)
	}
	p.(*procPeer).stdin.Close()
	<-p.(*procPeer).done
	if _, err := os.Stat(other); err != nil {
		t.Errorf("peer removed a directory that was not its scratch: %v", err)
	}
}

func TestPeerProtocolErrors(t *testing.T) {
	dir := t.TempDir()
	p, err := processPeer(context.Background(), filepath.Join(dir, scratchPrefix+"x"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	_, err = p.Do(context.Background(), OpFlockExclusive, filepath.Join(dir, "missing", "x.lock"))
	if err == nil || !strings.Contains(err.Error(), "second process") {
		t.Errorf("lock in a missing directory: %v", err)
	}
	if _, err := p.Do(context.Background(), Op("bogus"), "x"); err == nil || !strings.Contains(err.Error(), "unknown operation") {
		t.Errorf("unknown op: %v", err)
	}
	// Still usable after errors.
	if a, err := p.Do(context.Background(), OpMkdir, filepath.Join(dir, "d")); err != nil || a != Won {
		t.Errorf("mkdir: %v %v", a, err)
	}
	if a, err := p.Do(context.Background(), OpMkdir, filepath.Join(dir, "d")); err != nil || a != Lost {
		t.Errorf("second mkdir: %v %v", a, err)
	}
}

func TestExitStatus(t *testing.T) {
	for v, want := range map[Verdict]int{Safe: 0, Unsafe: 1, Unknown: 2, Verdict(""): 2} {
		if got := v.ExitStatus(); got != want {
			t.Errorf("%q.ExitStatus() = %d, want %d", v, got, want)
		}
	}
}

func TestJSON(t *testing.T) {
	rep := mustRun(t, Config{})
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"path", "os", "filesystem", "probes", "assessments", "protocol", "verdict", "summary", "ms", "clock_skew_ms", "second_process"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
	if m["verdict"] != string(rep.Verdict) {
		t.Errorf("verdict %v", m["verdict"])
	}
	probes := m["probes"].([]any)
	first := probes[0].(map[string]any)
	for _, k := range []string{"name", "result", "detail", "ms"} {
		if _, ok := first[k]; !ok {
			t.Errorf("probe JSON lacks %q", k)
		}
	}
}

func TestNotADirectory(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := Check(context.Background(), f, Config{}); err == nil {
		t.Error("Run on a file succeeded")
	}
	if _, err := Check(context.Background(), filepath.Join(t.TempDir(), "missing"), Config{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Run on a missing directory: %v", err)
	}
}

// sharedExcludingPeer never gets a shared lock, as on a filesystem that
// turns shared locks into exclusive ones.
type sharedExcludingPeer struct{ Peer }

func (p sharedExcludingPeer) Do(ctx context.Context, op Op, path string) (Answer, error) {
	if op == OpFlockShared {
		return Denied, nil
	}
	return p.Peer.Do(ctx, op, path)
}

func TestSharedLocksExcludeEachOther(t *testing.T) {
	rep := mustRun(t, Config{NewPeer: func(context.Context, string) (Peer, error) {
		return sharedExcludingPeer{NewLocalPeer()}, nil
	}})
	p := rep.Probe(ProbeLockShared)
	if p.Result != Warn || !strings.Contains(p.Detail, "shared locks exclude each other") {
		t.Errorf("lock-shared: %+v", p)
	}
	// Nobody gets in who should not: safe, with a warning.
	if rep.Verdict != Safe || !strings.Contains(rep.Summary, "warnings: lock-shared") {
		t.Errorf("verdict %s: %s", rep.Verdict, rep.Summary)
	}
}

func TestFilesystemUnidentified(t *testing.T) {
	rep := mustRun(t, Config{statFS: func(string) (fsinfo.Filesystem, error) {
		return fsinfo.Filesystem{}, errors.New("statfs: function not implemented")
	}})
	if p := rep.Probe(ProbeFilesystem); p.Result != Error || !strings.Contains(p.Detail, "not implemented") {
		t.Errorf("filesystem: %+v", p)
	}
	// The locks work here, but on what, and shared with whom?
	if rep.Verdict != Unknown || rep.Verdict.ExitStatus() != 2 {
		t.Errorf("verdict %s: %s", rep.Verdict, rep.Summary)
	}
}
