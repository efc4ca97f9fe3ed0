package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/doctor"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/portable"
)

// Two bindfs mounts of one directory stand in for two machines sharing a
// network filesystem whose kernel locks stay on each client: a flock taken
// through one mount is not seen through the other (the FUSE kernel module
// keeps it per mount, as it does for sshfs, s3fs, rclone...), while mkdir
// and O_EXCL create reach the one directory underneath and stay atomic.

// The test mounts use bindfs's defaults. Among them: a file unlinked while
// some process still has it open is renamed to ".fuse_hidden..." in the
// same directory until it is closed, as an NFS client renames it to
// ".nfs..." (a "silly rename"). A waiter reading a lock's owner.json at the
// moment its holder releases leaves one in the moved-aside lock; the
// portable protocol counts it as the lock's own (dirlock's isSillyRename),
// and these tests run into it.

// sharedDir is one directory seen through two FUSE mounts.
type sharedDir struct {
	base string // the directory itself
	a, b string // the two mounts ("machines")
}

// mountTwice mounts a fresh directory twice with bindfs and unmounts both
// in cleanup, also when the test fails. It skips, saying why, where bindfs
// or FUSE is unavailable; CI installs bindfs (see .ci/run).
func mountTwice(t *testing.T) sharedDir {
	t.Helper()
	bindfs := testenv.LookPath(t, "bindfs", "not installed (CI installs it: apt package bindfs)")
	if _, err := os.Stat("/dev/fuse"); err != nil {
		testenv.MissingTool(t, "FUSE", fmt.Sprintf("unavailable here: %v", err))
	}
	root := t.TempDir()
	d := sharedDir{base: filepath.Join(root, "base"), a: filepath.Join(root, "a"), b: filepath.Join(root, "b")}
	for _, p := range []string{d.base, d.a, d.b} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range []string{d.a, d.b} {
		out, err := exec.Command(bindfs, d.base, m).CombinedOutput()
		if err != nil {
			testenv.MissingTool(t, "FUSE", fmt.Sprintf("unavailable here: bindfs %s %s: %v: %s", d.base, m, err, out))
		}
		t.Cleanup(func() { unmount(t, m) })
	}
	return d
}

// unmount undoes a FUSE mount, with the FUSE tool where there is one, and
// fails the test if the mount stays.
func unmount(t *testing.T, dir string) {
	var errs []error
	for _, argv := range [][]string{{"fusermount3", "-u", dir}, {"fusermount", "-u", dir}, {"umount", dir}, {"umount", "-l", dir}} {
		if _, err := exec.LookPath(argv[0]); err != nil {
			continue
		}
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err == nil {
			return
		}
		errs = append(errs, fmt.Errorf("%v: %v: %s", argv, err, bytes.TrimSpace(out)))
	}
	t.Errorf("could not unmount %s: %v", dir, errors.Join(errs...))
}

// holdEnv runs hold in dir with extra environment variables.
func holdEnv(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	return runIn(t, dir, append(withoutEnv(os.Environ(), lockspec.ProtocolEnv), env...), holdBin, args...)
}

// withoutEnv drops the variable name from env.
func withoutEnv(env []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}

// TestSharedFSWarning: the default protocol on a FUSE mount warns, once,
// naming the filesystem and the remedies, and exits as usual; an explicit
// choice of the kernel lock, or a local disk, does not warn. The library's
// finding agrees.
func TestSharedFSWarning(t *testing.T) {
	t.Parallel()
	d := mountTwice(t)
	r := holdEnv(t, d.a, nil, "run", "t", "--", "true")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if strings.Count(r.stderr, "warning") != 1 || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("want one warning line, got %q", r.stderr)
	}
	for _, want := range []string{"fuse", "--protocol dir", "hold doctor"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("warning %q does not mention %q", r.stderr, want)
		}
	}
	if r := holdEnv(t, d.a, nil, "run", "--protocol", "flock", "t", "--", "true"); r.code != 0 || r.stderr != "" {
		t.Errorf("--protocol flock: exit %d, stderr %q; want 0 and nothing", r.code, r.stderr)
	}
	if r := holdEnv(t, d.a, []string{lockspec.ProtocolEnv + "=flock"}, "run", "t", "--", "true"); r.code != 0 || r.stderr != "" {
		t.Errorf("HOLD_PROTOCOL=flock: exit %d, stderr %q; want 0 and nothing", r.code, r.stderr)
	}
	// The exit status is the command's, warning or not.
	if r := holdEnv(t, d.a, nil, "run", "t", "--", "sh", "-c", "exit 7"); r.code != 7 {
		t.Errorf("exit %d, want the command's 7", r.code)
	}
	local := t.TempDir()
	if r := holdEnv(t, local, nil, "run", "t", "--", "true"); r.code != 0 || r.stderr != "" {
		t.Errorf("local disk: exit %d, stderr %q; want 0 and nothing", r.code, r.stderr)
	}

	ctx := context.Background()
	l, err := hold.Acquire(ctx, filepath.Join(d.b, "t"))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.MachineLocal(); !errors.Is(err, hold.ErrMachineLocal) || !strings.Contains(err.Error(), "fuse") {
		t.Errorf("MachineLocal on the mount: %v", err)
	}
	l.Release()
	if _, err := hold.Acquire(ctx, filepath.Join(d.b, "t"), hold.RefuseMachineLocal()); !errors.Is(err, hold.ErrMachineLocal) {
		t.Errorf("RefuseMachineLocal on the mount: %v", err)
	}
	l, err = hold.Acquire(ctx, filepath.Join(local, "t"), hold.RefuseMachineLocal())
	if err != nil {
		t.Fatalf("RefuseMachineLocal on a local disk: %v", err)
	}
	if err := l.MachineLocal(); err != nil {
		t.Errorf("MachineLocal on a local disk: %v", err)
	}
	l.Release()
	p, err := hold.Acquire(ctx, filepath.Join(d.b, "p"), hold.WithProtocol(portable.New()), hold.RefuseMachineLocal())
	if err != nil {
		t.Fatalf("portable lock with RefuseMachineLocal on the mount: %v", err)
	}
	if err := p.MachineLocal(); err != nil {
		t.Errorf("MachineLocal of a portable lock: %v", err)
	}
	p.Release()
}

// incrementScript increments the number in the file counter of the
// current directory with a wide window between read and write.
const incrementScript = `n=$(cat counter 2>/dev/null || echo 0); echo $((n+1)) > counter.$$; mv counter.$$ counter`

// TestSharedFSPortableCount increments one counter through both mounts at
// once with the portable protocol: hold run workers and Go library workers
// on each mount. No increment may be lost.
func TestSharedFSPortableCount(t *testing.T) {
	t.Parallel()
	d := mountTwice(t)
	var c counting
	for _, m := range []string{d.a, d.b} {
		c.cliWorkers(m, 2, 10)
		c.goWorkers(m, 2, 20)
	}
	c.check(t, d.base)
}

// TestSharedFSNodeInterop: proper-lockfile (Node) workers on one mount and
// hold, as run workers and as a Go library, on the other increment one
// counter: proper-lockfile and the portable protocol exclude each other
// across the two "machines".
func TestSharedFSNodeInterop(t *testing.T) {
	t.Parallel()
	node, worker, ok := nodeLockfile()
	if !ok {
		testenv.MissingTool(t, "node, proper-lockfile", "not installed (.ci/run installs both)")
	}
	d := mountTwice(t)
	var c counting
	c.cliWorkers(d.b, 2, 10)
	c.goWorkers(d.b, 1, 20)
	for range 2 {
		c.start(15, func() error {
			cmd := exec.Command(node, worker, "count", filepath.Join(d.a, "counter"), "15", "10000")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("proper-lockfile worker: %v: %s", err, out)
			}
			return nil
		})
	}
	c.check(t, d.base)
	if v, err := os.ReadFile(filepath.Join(d.base, "counter.violation")); err == nil {
		t.Errorf("a Node worker saw another holder in its critical section: %s", v)
	}
}

// counting runs workers that each increment the counter in one directory
// a number of times, and checks that the sum arrived.
type counting struct {
	wg    sync.WaitGroup
	mu    sync.Mutex
	total int
	errs  []error
}

// start runs f, which makes n increments, in the background.
func (c *counting) start(n int, f func() error) {
	c.total += n
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := f(); err != nil {
			c.mu.Lock()
			c.errs = append(c.errs, err)
			c.mu.Unlock()
		}
	}()
}

// cliWorkers starts n `hold run --protocol dir` loops of iters increments
// in dir.
func (c *counting) cliWorkers(dir string, n, iters int) {
	for range n {
		c.start(iters, func() error {
			for range iters {
				cmd := exec.Command(holdBin, "run", "--protocol", "dir", "counter", "-c", incrementScript)
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					return fmt.Errorf("hold run in %s: %v: %s", dir, err, out)
				}
			}
			return nil
		})
	}
}

// goWorkers starts n goroutines that make iters increments each under
// hold.Do with the portable protocol, in dir.
func (c *counting) goWorkers(dir string, n, iters int) {
	counter := filepath.Join(dir, "counter")
	for range n {
		c.start(iters, func() error {
			for range iters {
				err := hold.Do(context.Background(), counter, func(context.Context) error {
					return incrementFile(counter)
				}, hold.WithProtocol(portable.New()))
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
}

// check waits for the workers started so far and compares the counter in
// dir with the number of increments made.
func (c *counting) check(t *testing.T, dir string) {
	t.Helper()
	c.wg.Wait()
	for _, err := range c.errs {
		t.Error(err)
	}
	got := strings.TrimSpace(readFile(t, filepath.Join(dir, "counter")))
	if want := strconv.Itoa(c.total); got != want {
		t.Fatalf("counter = %s, want %s", got, want)
	}
}

// incrementFile adds one to the number in path, writing it back in place
// (as the Node worker does), so that an unlocked overlap loses counts.
func incrementFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return os.WriteFile(path, []byte(strconv.Itoa(n+1)), 0o644)
}

// nodeLockfile finds node and the proper-lockfile worker of the dirlock
// interop tests, which .ci/run installs.
func nodeLockfile() (node, worker string, ok bool) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", "", false
	}
	dir, err := filepath.Abs(filepath.Join("..", "dirlock", "testdata", "node"))
	if err != nil {
		return "", "", false
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "proper-lockfile", "package.json")); err != nil {
		return "", "", false
	}
	return node, filepath.Join(dir, "worker.js"), true
}

// TestSharedFSUpdate: `hold update --protocol dir` through both mounts at
// once loses no update.
func TestSharedFSUpdate(t *testing.T) {
	t.Parallel()
	d := mountTwice(t)
	if err := os.WriteFile(filepath.Join(d.base, "n"), []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const workers, iters = 2, 8 // per mount
	errs := make(chan error, 2*workers)
	for _, m := range []string{d.a, d.b} {
		for range workers {
			go func() {
				for range iters {
					cmd := exec.Command(holdBin, "update", "--protocol", "dir", "n", "--", "sh", "-c", `read n; echo $((n+1))`)
					cmd.Dir = m
					if out, err := cmd.CombinedOutput(); err != nil {
						errs <- fmt.Errorf("hold update on %s: %v: %s", m, err, out)
						return
					}
				}
				errs <- nil
			}()
		}
	}
	for range 2 * workers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if got, want := strings.TrimSpace(readFile(t, filepath.Join(d.base, "n"))), strconv.Itoa(2*workers*iters); got != want {
		t.Fatalf("n = %s, want %s", got, want)
	}
}

// sharedFSTimings make staleness quick for the tests that wait for it,
// with room for hold run's default StopWithin (--kill-after 2s plus half a
// second): a holder calls its lock lost 5s - 2.5s - one heartbeat after
// its last refresh, which a loaded machine does not reach by chance.
var sharedFSTimings = []string{"HOLD_DIR_STALE=5s", "HOLD_DIR_HEARTBEAT=300ms", "HOLD_DIR_GRACE=1s"}

// TestSharedFSLostLock: a portable lock removed through the other mount is
// found lost by its holder, which ends its command and exits 65.
func TestSharedFSLostLock(t *testing.T) {
	t.Parallel()
	d := mountTwice(t)
	cmd := exec.Command(holdBin, "run", "--protocol", "dir", "t", "--", "sh", "-c", "touch started; while [ ! -e stop ]; do sleep 0.05; done")
	cmd.Dir = d.a
	cmd.Env = append(os.Environ(), sharedFSTimings...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killAtCleanup(t, cmd)
	waitFor(t, filepath.Join(d.b, "started"))
	if err := os.RemoveAll(filepath.Join(d.b, "t.lock")); err != nil {
		t.Fatal(err)
	}
	// A few heartbeats for the holder to look, then let its command end.
	time.Sleep(time.Second)
	if err := os.WriteFile(filepath.Join(d.b, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, cmd); code != exitLockError {
		t.Fatalf("exit %d, want %d (lost): %s", code, exitLockError, errb.String())
	}
	if !strings.Contains(errb.String(), "lost") {
		t.Errorf("stderr does not say the lock was lost: %q", errb.String())
	}
}

// TestSharedFSOtherHost: a holder on another machine (a UTS namespace with
// its own host name) through the other mount. status names its host and
// judges it by its heartbeat; break refuses it while the heartbeat is
// fresh; once it is killed, a waiter takes over after the heartbeat has
// gone stale, not before.
func TestSharedFSOtherHost(t *testing.T) {
	t.Parallel()
	d := mountTwice(t)
	unshare := testenv.LookPath(t, "unshare", "not installed (apt package util-linux)")
	if os.Geteuid() != 0 {
		t.Skip("a UTS namespace needs root (CI runs as root)")
	}
	holder := exec.Command(unshare, "-u", "sh", "-c", `hostname other-host && exec "$0" run --protocol dir t -- sh -c 'touch held; exec sleep 60'`, holdBin)
	holder.Dir = d.b
	holder.Env = append(os.Environ(), sharedFSTimings...)
	var herr bytes.Buffer
	holder.Stderr = &herr
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if holder.ProcessState == nil {
			holder.Process.Kill()
			holder.Wait()
		}
	})
	waitFor(t, filepath.Join(d.a, "held"))

	st := holdEnv(t, d.a, sharedFSTimings, "status", "--protocol", "dir", "t")
	if !strings.Contains(st.stdout, "other-host") || !strings.Contains(st.stdout, "heartbeat") {
		t.Errorf("status does not name the other host or judge it by heartbeat (exit %d):\n%s%s", st.code, st.stdout, st.stderr)
	}
	if br := holdEnv(t, d.a, sharedFSTimings, "break", "--protocol", "dir", "t"); br.code == 0 {
		t.Errorf("break of a holder with a fresh heartbeat succeeded:\n%s%s", br.stdout, br.stderr)
	}

	// unshare execs sh, which execs hold: holder.Process is hold itself.
	if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	holder.Wait()
	killed := time.Now()
	w := holdEnv(t, d.a, sharedFSTimings, "run", "--protocol", "dir", "-w", "20", "t", "--", "true")
	took := time.Since(killed)
	if w.code != 0 {
		t.Fatalf("waiter: exit %d: %s", w.code, w.stderr)
	}
	// The heartbeat was at most one beat (300ms) old at the kill, and the
	// lock is stale 5s after it: taking it in less than 4s would be too
	// early, whatever the machine's load.
	if took < 4*time.Second {
		t.Errorf("the waiter took the lock %v after the holder died; the heartbeat was still fresh", took)
	}
	t.Logf("took over %v after SIGKILL (stale after 5s)", took.Round(time.Millisecond))
}

// TestSharedFSDoctor: on the mount, doctor calls the portable protocol
// safe (mkdir and O_EXCL reach one directory), cannot vouch for kernel
// locks, and reports a rename it saw fail as a note about `hold update`,
// not as a verdict on a lock; in text and JSON.
func TestSharedFSDoctor(t *testing.T) {
	t.Parallel()
	d := mountTwice(t)
	r := holdEnv(t, d.a, nil, "doctor", "--protocol", "dir", ".")
	if r.code != 0 || !strings.Contains(r.stdout, "safe: hold uses dir") {
		t.Errorf("doctor --protocol dir: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "flock would be unknown") {
		t.Errorf("doctor --protocol dir does not say flock is unknown:\n%s", r.stdout)
	}
	r = holdEnv(t, d.a, nil, "doctor", ".")
	if r.code != doctor.Unknown.ExitStatus() || !strings.Contains(r.stdout, "--protocol dir is safe here") {
		t.Errorf("doctor (flock): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = holdEnv(t, d.a, nil, "doctor", "--json", "--protocol", "dir", ".")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, r.stdout)
	}
	if r.code != 0 || rep.Verdict != doctor.Safe || rep.Assessment("dir").Verdict != doctor.Safe || rep.Assessment("flock").Verdict != doctor.Unknown {
		t.Errorf("doctor --json: exit %d, verdict %s, assessments %+v", r.code, rep.Verdict, rep.Assessments)
	}
	if !rep.Filesystem.FUSE || rep.Filesystem.Mirror == nil {
		t.Errorf("filesystem %+v: want FUSE mirroring the base directory", rep.Filesystem)
	}
	if p := rep.Probe(doctor.ProbeRename); p != nil && p.Result == doctor.Fail {
		if len(rep.Notes) == 0 || rep.Notes[0].About != doctor.NoteUpdate {
			t.Errorf("the rename probe failed but no note about update: %+v", rep.Notes)
		}
	}
}

// BenchmarkSharedFSHandOff measures how long a waiter takes to get a
// portable lock after its holder releases it: through the same mount
// (change notification wakes it) and through the other mount (no event
// arrives: it polls with backoff up to HOLD_DIR_MAX_POLL). Reported as the
// median and 90th percentile hand-off in ms, for holds of 20ms (backoff
// still growing) and 500ms (backoff at its cap).
func BenchmarkSharedFSHandOff(b *testing.B) {
	bindfs, err := exec.LookPath("bindfs")
	if err != nil {
		b.Skip("bindfs is not installed")
	}
	root := b.TempDir()
	base, ma, mb := filepath.Join(root, "base"), filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, p := range []string{base, ma, mb} {
		os.Mkdir(p, 0o755)
	}
	for _, m := range []string{ma, mb} {
		if out, err := exec.Command(bindfs, base, m).CombinedOutput(); err != nil {
			b.Skipf("bindfs: %v: %s", err, out)
		}
		defer func() {
			if exec.Command("fusermount3", "-u", m).Run() != nil {
				exec.Command("umount", m).Run()
			}
		}()
	}
	for _, c := range []struct {
		name      string
		waiterDir string
		hold      time.Duration
	}{{"same-mount/hold-20ms", ma, 20 * time.Millisecond}, {"other-mount/hold-20ms", mb, 20 * time.Millisecond},
		{"same-mount/hold-500ms", ma, 500 * time.Millisecond}, {"other-mount/hold-500ms", mb, 500 * time.Millisecond}} {
		b.Run(c.name, func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				l, err := hold.Acquire(context.Background(), filepath.Join(ma, "t"), hold.WithProtocol(portable.New()))
				if err != nil {
					b.Fatal(err)
				}
				got := make(chan time.Time, 1)
				go func() {
					w, err := hold.Acquire(context.Background(), filepath.Join(c.waiterDir, "t"), hold.WithProtocol(portable.New()))
					if err != nil {
						b.Error(err)
						got <- time.Time{}
						return
					}
					now := time.Now()
					w.Release()
					got <- now
				}()
				time.Sleep(c.hold) // the waiter waits, its backoff growing
				released := time.Now()
				l.Release()
				lat = append(lat, (<-got).Sub(released))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms-median")
			b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "ms-p90")
		})
	}
}
