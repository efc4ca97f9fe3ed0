package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hold-dev/hold/internal/dirlock"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/fsinfo"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// Sizes of the races. Small: each round costs a few goroutine starts and
// syscalls, and a non-atomic filesystem shows itself in the first rounds.
const (
	racers      = 8
	mkdirRounds = 20
	exclRounds  = 10
	// renames is the most renames the rename probe does; it stops early,
	// after minRenames, once renameBudget has passed (a loaded machine
	// must not turn a quick check into a slow one).
	renames      = 50
	minRenames   = 10
	renameBudget = 100 * time.Millisecond
)

// Clock thresholds. A skew up to skewWarn is within the timestamp
// granularity of common filesystems (FAT keeps two seconds). The portable
// protocol calls a lock whose heartbeat is older than its stale time
// abandoned, and a live holder's heartbeat is up to one heartbeat interval
// old: a filesystem clock behind by more than the difference makes a live
// holder's lock look abandoned, to hold and to proper-lockfile alike
// (which shares the default stale time).
const (
	skewWarn   = 2 * time.Second
	skewUnsafe = dirlock.DefaultStale - dirlock.DefaultHeartbeat
)

func (r *run) probeFilesystem() (Result, string) {
	fs, err := r.cfg.statFS(r.report.Path)
	if err != nil {
		return Error, err.Error()
	}
	r.report.fs, r.report.Filesystem = fs, publicFilesystem(fs)
	switch {
	case fs.FUSE && fs.Class == fsinfo.Local:
		return Pass, fmt.Sprintf("%s: a FUSE filesystem over local storage", fs)
	case fs.FUSE:
		return Warn, fmt.Sprintf("%s: a FUSE filesystem; its daemon decides what locks mean", fs)
	case fs.Network:
		return Warn, fmt.Sprintf("%s: a network filesystem; other machines may share it", fs)
	case fs.Class == fsinfo.ServerLocks:
		return Warn, fmt.Sprintf("%s on a network share; other machines may share it", fs)
	case !fs.Known:
		return Warn, fmt.Sprintf("%s: not a filesystem doctor knows", fs)
	}
	return Pass, fmt.Sprintf("%s: a local filesystem", fs)
}

// take tries a kernel lock on path the way hold takes one, through its
// flock protocol, without waiting.
func take(path string, shared bool) (h lock.Handle, granted bool, err error) {
	req := &lock.Request{Path: path, Shared: shared, Owner: proc.Self()}
	req.Owner.ID = "hold-doctor"
	h, err = flock.Protocol{}.TryAcquire(req)
	if errors.Is(err, lock.ErrBusy) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return h, true, nil
}

// second names the peer in details.
func (r *run) second() string {
	if r.peer != nil && r.peer.Separate() {
		return "a second process"
	}
	return "a second open in this process"
}

// peerLock asks the peer for a lock and says whether it was granted.
func (r *run) peerLock(ctx context.Context, op Op, path string) (bool, error) {
	a, err := r.peer.Do(ctx, op, path)
	if err != nil {
		return false, err
	}
	switch a {
	case Granted:
		return true, nil
	case Denied:
		return false, nil
	}
	return false, fmt.Errorf("second party answered %q to %s", a, op)
}

// lockErr reports a lock operation that failed. A filesystem that refuses
// kernel locks (ENOLCK, EOPNOTSUPP) is a finding, not a failed
// experiment: hold cannot use flock there.
func lockErr(what string, err error) (Result, string) {
	if errors.Is(err, lock.ErrUnsupported) {
		return Fail, fmt.Sprintf("this filesystem refuses kernel locks (%s: %v)", what, err)
	}
	return Error, fmt.Sprintf("%s: %v", what, err)
}

func (r *run) probeExclusive(ctx context.Context) (Result, string) {
	path := filepath.Join(r.scratch, "exclusive.lock")
	defer r.peer.Do(ctx, OpRelease, "")
	h, ok, err := take(path, false)
	if err != nil {
		return lockErr("taking an exclusive lock", err)
	}
	if !ok {
		return Error, "a lock file nobody had opened was reported busy"
	}
	held := true
	defer func() {
		if held {
			h.Release()
		}
	}()
	if got, err := r.peerLock(ctx, OpFlockExclusive, path); err != nil {
		return lockErr("second party's exclusive lock", err)
	} else if got {
		return Fail, r.second() + " got an exclusive lock while the first open held one"
	}
	if got, err := r.peerLock(ctx, OpFlockShared, path); err != nil {
		return lockErr("second party's shared lock", err)
	} else if got {
		return Fail, r.second() + " got a shared lock while the first open held an exclusive one"
	}
	held = false
	if err := h.Release(); err != nil {
		return lockErr("releasing", err)
	}
	// The other way round: the lock must be free again, and the first
	// open must now see the second's lock. A lock that stays busy after
	// release would hang every waiter.
	if got, err := r.peerLock(ctx, OpFlockExclusive, path); err != nil {
		return lockErr("second party's exclusive lock after release", err)
	} else if !got {
		return Fail, "the lock stayed busy after its holder released it"
	}
	h2, ok, err := take(path, false)
	if err != nil {
		return lockErr("taking the lock while the second party holds it", err)
	}
	if ok {
		h2.Release()
		return Fail, "the first open got an exclusive lock while " + r.second() + " held one"
	}
	return Pass, r.second() + " cannot take a lock, exclusive or shared, while another open holds it exclusively, and the lock is free again once released (both directions)"
}

func (r *run) probeShared(ctx context.Context) (Result, string) {
	path := filepath.Join(r.scratch, "shared.lock")
	defer r.peer.Do(ctx, OpRelease, "")
	h, ok, err := take(path, true)
	if err != nil {
		return lockErr("taking a shared lock", err)
	}
	if !ok {
		return Error, "a lock file nobody had opened was reported busy"
	}
	defer h.Release()
	res, detail := Pass, "shared locks coexist, and a shared lock keeps an exclusive one out"
	got, err := r.peerLock(ctx, OpFlockShared, path)
	if err != nil {
		return lockErr("second party's shared lock", err)
	}
	if !got {
		// Safe (nobody gets in who should not) but readers queue up.
		res, detail = Warn, "shared locks exclude each other here: readers take turns as if their locks were exclusive, and a shared lock keeps an exclusive one out"
	}
	if _, err := r.peer.Do(ctx, OpRelease, ""); err != nil {
		return lockErr("second party's release", err)
	}
	if got, err := r.peerLock(ctx, OpFlockExclusive, path); err != nil {
		return lockErr("second party's exclusive lock", err)
	} else if got {
		return Fail, r.second() + " got an exclusive lock while a shared one was held: a writer could change what readers read"
	}
	return res, detail
}

// probeFlockFcntl holds a flock(2) lock and lets the peer try a POSIX
// fcntl lock on the same file. On a local Linux filesystem the two kinds
// are independent. NFS and SMB clients implement flock by sending a
// byte-range lock to the server, and then the two conflict: the sign that
// flock locks reach the server. BSD and macOS implement both kinds
// together, so they always conflict there and the probe says nothing
// about the filesystem.
func (r *run) probeFlockFcntl(ctx context.Context) (Result, string) {
	if runtime.GOOS == "windows" {
		return Skip, "Windows has one kind of file lock"
	}
	path := filepath.Join(r.scratch, "interact.lock")
	defer r.peer.Do(ctx, OpRelease, "")
	h, ok, err := take(path, false)
	if err != nil {
		return lockErr("taking a flock lock", err)
	}
	if !ok {
		return Error, "a lock file nobody had opened was reported busy"
	}
	defer h.Release()
	got, err := r.peerLock(ctx, OpFcntlWrite, path)
	if err != nil {
		if errors.Is(err, lock.ErrUnsupported) {
			return Warn, "POSIX locks are refused here: " + err.Error()
		}
		return lockErr("second party's fcntl lock", err)
	}
	interact := !got
	r.report.FlockFcntlInteract = &interact
	switch {
	case runtime.GOOS != "linux" && interact:
		return Pass, "flock and fcntl locks conflict, as they always do on " + runtime.GOOS
	case runtime.GOOS != "linux":
		return Pass, "flock and fcntl locks are independent"
	case interact && r.report.fs.Class == fsinfo.Local:
		return Warn, "flock and fcntl locks conflict, which a local Linux filesystem never does: flock is being emulated with byte-range locks"
	case interact:
		return Pass, "flock and fcntl locks conflict: the kernel emulates flock with byte-range locks, as NFS and SMB clients do to send flock locks to the server"
	}
	return Pass, "flock and fcntl locks are independent: flock locks are kept by this machine's kernel"
}

// probeReleasedOnExit lets a second process take a lock and end without
// unlocking, as a crash would: the kernel must free the lock. This is
// what makes kernel locks immune to stale holders.
func (r *run) probeReleasedOnExit(ctx context.Context) (Result, string) {
	if !r.peer.Separate() {
		return Skip, "needs a second process: `hold doctor` runs one, the library's check does not"
	}
	p, err := r.cfg.NewPeer(ctx, r.scratch)
	if err != nil {
		return lockErr("starting a second process", err)
	}
	defer p.Close()
	path := filepath.Join(r.scratch, "exit.lock")
	a, err := p.Do(ctx, OpFlockExclusive, path)
	if err != nil {
		return lockErr("second process's lock", err)
	}
	if a != Granted {
		return Error, "a lock file nobody had opened was reported busy"
	}
	if h, ok, err := take(path, false); err != nil {
		return lockErr("taking the lock while the second process holds it", err)
	} else if ok {
		h.Release()
		return Fail, "this process got the lock while the second process held it"
	}
	if _, err := p.Do(ctx, OpExit, ""); err != nil {
		return lockErr("ending the second process", err)
	}
	// The process has been reaped, so its files are closed; a network
	// client may still be telling the server. Allow it a moment.
	deadline := time.Now().Add(time.Second)
	for {
		h, ok, err := take(path, false)
		if err != nil {
			return lockErr("taking the lock after the holder exited", err)
		}
		if ok {
			h.Release()
			return Pass, "the lock of a process that exited without unlocking was freed by the kernel"
		}
		if time.Now().After(deadline) {
			return Fail, "the lock of a process that exited stayed held: every later waiter would hang"
		}
		select {
		case <-ctx.Done():
			return Error, ctx.Err().Error()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// race runs racers goroutines (plus, when peerToo, the peer, which in
// `hold doctor` is another process) that call create on the same name at
// once, and returns how many succeeded. Goroutines are a faithful race
// for these calls: each is one system call, and the kernel serializes
// mkdir and O_EXCL create on the parent directory whatever process or
// thread asks; the peer adds a second process for good measure.
func (r *run) race(ctx context.Context, name string, create func(string) error, peerToo bool) (wins int, err error) {
	var won atomic.Int32
	var errMu sync.Mutex
	var firstErr error
	record := func(e error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = e
		}
		errMu.Unlock()
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			e := create(name)
			switch {
			case e == nil:
				won.Add(1)
			case !errors.Is(e, os.ErrExist):
				record(e)
			}
		}()
	}
	if peerToo {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			a, e := r.peer.Do(ctx, OpMkdir, name)
			switch {
			case e != nil:
				record(e)
			case a == Won:
				won.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	return int(won.Load()), firstErr
}

func (r *run) probeMkdir(ctx context.Context) (Result, string) {
	for i := range mkdirRounds {
		if err := ctx.Err(); err != nil {
			return Error, err.Error()
		}
		name := filepath.Join(r.scratch, fmt.Sprintf("mkdir-%d", i))
		wins, err := r.race(ctx, name, r.cfg.Mkdir, true)
		if err != nil {
			return Error, fmt.Sprintf("mkdir: %v", err)
		}
		if wins != 1 {
			return Fail, fmt.Sprintf("round %d: %d of %d racers created the same directory (exactly one must)", i+1, wins, racers+1)
		}
	}
	return Pass, fmt.Sprintf("exactly one of %d racers (%s among them) created the directory, %d rounds out of %d", racers+1, r.second(), mkdirRounds, mkdirRounds)
}

func (r *run) probeCreateExclusive(ctx context.Context) (Result, string) {
	path := filepath.Join(r.scratch, "excl")
	if err := r.cfg.CreateExclusive(path); err != nil {
		return Error, fmt.Sprintf("creating a new file with O_EXCL: %v", err)
	}
	err := r.cfg.CreateExclusive(path)
	switch {
	case err == nil:
		return Fail, "O_EXCL create succeeded on a file that already existed"
	case !errors.Is(err, os.ErrExist):
		return Error, fmt.Sprintf("O_EXCL create of an existing file failed, but not with \"file exists\": %v", err)
	}
	for i := range exclRounds {
		if err := ctx.Err(); err != nil {
			return Error, err.Error()
		}
		wins, err := r.race(ctx, filepath.Join(r.scratch, fmt.Sprintf("excl-%d", i)), r.cfg.CreateExclusive, false)
		if err != nil {
			return Error, fmt.Sprintf("O_EXCL create: %v", err)
		}
		if wins != 1 {
			return Fail, fmt.Sprintf("round %d: %d of %d racers created the same file with O_EXCL (exactly one must)", i+1, wins, racers)
		}
	}
	return Pass, fmt.Sprintf("O_EXCL create fails for an existing file, and exactly one of %d racers wins, %d rounds out of %d", racers, exclRounds, exclRounds)
}

// probeRename renames fresh files over one target again and again while a
// reader keeps reading it: a rename that replaces atomically never lets
// the reader find the target missing or half-written, and leaves exactly
// the new content behind.
func (r *run) probeRename(ctx context.Context) (Result, string) {
	target := filepath.Join(r.scratch, "rename-target")
	record := func(i int) []byte { return fmt.Appendf(nil, "generation %06d\n", i) }
	if err := os.WriteFile(target, record(0), 0o644); err != nil {
		return Error, err.Error()
	}
	// On Windows a reader's open handle makes a rename over the file fail
	// (a sharing violation), which says nothing about atomicity; hold's
	// updates retry that. The concurrent reader is left out there.
	concurrent := runtime.GOOS != "windows"
	stop := make(chan struct{})
	var reads atomic.Int64
	var readErr atomic.Value
	var wg sync.WaitGroup
	if concurrent {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, err := os.ReadFile(target)
				reads.Add(1)
				switch {
				case err != nil:
					readErr.CompareAndSwap(nil, fmt.Sprintf("a reader found the target unreadable during a rename: %v", err))
				case len(b) != len(record(0)) || !bytes.HasPrefix(b, []byte("generation ")):
					readErr.CompareAndSwap(nil, fmt.Sprintf("a reader found the target torn during a rename: %q", b))
				}
			}
		}()
	}
	done := 0
	began := time.Now()
	res, detail := func() (Result, string) {
		for i := 1; i <= renames; i++ {
			if i > minRenames && time.Since(began) > renameBudget {
				break
			}
			if err := ctx.Err(); err != nil {
				return Error, err.Error()
			}
			if readErr.Load() != nil {
				break // the reader has seen enough
			}
			tmp := filepath.Join(r.scratch, fmt.Sprintf("rename-%d.tmp", i))
			if err := os.WriteFile(tmp, record(i), 0o644); err != nil {
				return Error, err.Error()
			}
			if err := r.cfg.Rename(tmp, target); err != nil {
				return Fail, fmt.Sprintf("renaming over an existing file failed: %v", err)
			}
			b, err := os.ReadFile(target)
			if err != nil {
				return Fail, fmt.Sprintf("the target was unreadable after a rename: %v", err)
			}
			if !bytes.Equal(b, record(i)) {
				return Fail, fmt.Sprintf("after a rename the target held %q instead of %q", b, record(i))
			}
			if _, err := os.Lstat(tmp); !errors.Is(err, os.ErrNotExist) {
				return Fail, "the renamed file still existed under its old name"
			}
			done = i
		}
		return Pass, ""
	}()
	close(stop)
	wg.Wait()
	if res != Pass {
		return res, detail
	}
	if e, ok := readErr.Load().(string); ok {
		return Fail, e
	}
	if !concurrent {
		return Pass, fmt.Sprintf("%d renames over an existing file each replaced it (no concurrent reader on Windows)", done)
	}
	return Pass, fmt.Sprintf("%d renames over an existing file each replaced it, and a reader (%d reads meanwhile) never found it missing or torn", done, reads.Load())
}

// probeNotify removes a directory inside a watched one and waits for the
// removal event: the portable protocol's waiters sleep until the lock
// directory goes, and fall back to polling with backoff where no event
// comes.
func (r *run) probeNotify(ctx context.Context) (Result, string) {
	sub := filepath.Join(r.scratch, "notify.lock")
	if err := os.Mkdir(sub, 0o755); err != nil {
		return Error, err.Error()
	}
	w, err := r.cfg.Watch(r.scratch)
	if err != nil {
		return Warn, fmt.Sprintf("cannot watch for changes (%v): portable-protocol waiters poll with backoff instead", err)
	}
	defer w.Close()
	start := time.Now()
	if err := os.Remove(sub); err != nil {
		return Error, err.Error()
	}
	timeout := time.NewTimer(r.cfg.NotifyTimeout)
	defer timeout.Stop()
	for {
		select {
		case p := <-w.Removed():
			if filepath.Base(p) != filepath.Base(sub) {
				continue
			}
			d := time.Since(start)
			if r.report.fs.Network || r.report.fs.FUSE {
				return Warn, fmt.Sprintf("a removal by this machine was reported after %s, but changes made by other machines are usually not reported on %s: waiters for them poll", round(d), r.report.fs)
			}
			return Pass, fmt.Sprintf("a directory's removal was reported after %s", round(d))
		case <-timeout.C:
			return Warn, fmt.Sprintf("no removal event within %s: portable-protocol waiters poll with backoff instead of waking at once", r.cfg.NotifyTimeout)
		case <-ctx.Done():
			return Error, ctx.Err().Error()
		}
	}
}

// probeClock writes a file and compares the timestamp the filesystem gave
// it with this machine's clock read just before and after. Age-based
// staleness (the portable protocol's heartbeat, proper-lockfile's stale
// time) compares exactly these two clocks.
func (r *run) probeClock(ctx context.Context) (Result, string) {
	path := filepath.Join(r.scratch, "clock")
	before := r.cfg.Now()
	if err := os.WriteFile(path, []byte("now\n"), 0o644); err != nil {
		return Error, err.Error()
	}
	fi, err := os.Stat(path)
	after := r.cfg.Now()
	if err != nil {
		return Error, err.Error()
	}
	mt := fi.ModTime()
	var skew time.Duration
	switch {
	case mt.Before(before):
		skew = mt.Sub(before)
	case mt.After(after):
		skew = mt.Sub(after)
	}
	skewMS := ms(skew)
	r.report.ClockSkewMillis = &skewMS
	abs := skew.Abs()
	switch {
	case skew < -skewUnsafe:
		return Fail, fmt.Sprintf("the filesystem's clock is %s behind this machine's: a live holder's heartbeat looks older than the portable protocol's stale time (%s), so its lock could be taken", round(abs), dirlock.DefaultStale)
	case abs > skewWarn && skew < 0:
		return Warn, fmt.Sprintf("the filesystem's clock is %s behind this machine's: locks judged by age look that much older", round(abs))
	case abs > skewWarn:
		return Warn, fmt.Sprintf("the filesystem's clock is %s ahead of this machine's: locks judged by age are taken over that much later", round(abs))
	}
	return Pass, fmt.Sprintf("the filesystem's timestamps agree with this machine's clock (within %s)", skewWarn)
}

// round shortens a duration for a sentence.
func round(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(time.Second).String()
	case d >= 10*time.Millisecond:
		return d.Round(time.Millisecond).String()
	case d >= 10*time.Microsecond:
		return d.Round(time.Microsecond).String()
	}
	return strings.TrimSpace(d.String())
}
