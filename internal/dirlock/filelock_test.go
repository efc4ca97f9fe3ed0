//go:build unix

package dirlock

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/lock"
)

// Python filelock's soft lock (SoftFileLock) and the portable protocol at
// one path: hold recognises filelock's file and waits for it (content.go,
// judge.go). The records below are the forms filelock 4.3.1 writes; the
// tests marked "real" run filelock itself, from the virtual environment
// .ci/run makes (python/.venv-filelock, PIP_PACKAGES).

// filelockHostField is the host field filelock writes for this process:
// socket.gethostname() with every byte outside 0x21-0x7e and '?' written
// "?xx", and the pid namespace's inode after "?pidns-" outside the initial
// one.
func filelockHostField() string {
	var b strings.Builder
	for _, c := range []byte(proc.Hostname()) {
		if c < 0x21 || c > 0x7e || c == '?' {
			fmt.Fprintf(&b, "?%02x", c)
		} else {
			b.WriteByte(c)
		}
	}
	if runtime.GOOS == "linux" {
		var st syscall.Stat_t
		if err := syscall.Stat("/proc/self/ns/pid", &st); err == nil && st.Ino != initialPIDNS {
			fmt.Fprintf(&b, "%s%x", filelockNSMark, st.Ino)
		}
	}
	if b.Len() == 0 {
		return "?"
	}
	return b.String()
}

// filelockStartToken is the start token filelock records for pid on
// Linux: the boot id as a number, shifted left by 64 bits, plus the
// process's start time in clock ticks. "" where it records none.
func filelockStartToken(pid int) string {
	if runtime.GOOS != "linux" {
		return ""
	}
	start, ok := proc.StartTime(pid)
	if !ok {
		return ""
	}
	tok := new(big.Int)
	if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
		tok.SetString(strings.ReplaceAll(strings.TrimSpace(string(b)), "-", ""), 16)
	}
	tok.Lsh(tok, 64)
	return tok.Add(tok, new(big.Int).SetUint64(start)).String()
}

// filelockRecord is what filelock's SoftFileLock writes for process pid
// of this host.
func filelockRecord(pid int) string {
	s := strconv.Itoa(pid) + "\n" + filelockHostField() + "\n"
	if tok := filelockStartToken(pid); tok != "" {
		s += tok + "\n"
	}
	return s
}

// workerSoftHold takes target as filelock's SoftFileLock does (an O_EXCL
// file holding its record), prints "held", holds it until stdin closes,
// then deletes it and prints "released".
func workerSoftHold(target string) int {
	f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "create:", err)
		return 2
	}
	fmt.Fprint(f, filelockRecord(os.Getpid()))
	f.Close()
	fmt.Println("held")
	os.Stdin.Read(make([]byte, 1))
	if err := os.Remove(target); err != nil {
		fmt.Println("release:", err)
		return 4
	}
	fmt.Println("released")
	return 0
}

// writeSoft writes a filelock record at path, as a holder that is not a
// process of the test would have left it.
func writeSoft(t *testing.T, path, record string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(record), 0o644); err != nil {
		t.Fatal(err)
	}
}

// filelock's records are recognised as they are written, and what is
// merely like them is not.
func TestFilelockSoftRecords(t *testing.T) {
	for _, c := range []struct {
		name, content string
		kind          softKind
		pid           int
		host          string
		ns            uint64
		start         string
	}{
		{"legacy with start", "4242\nbuild-7\n340282366920938463463374607431768211457\n", softHolder, 4242, "build-7", 0, "340282366920938463463374607431768211457"},
		{"legacy without start", "17\nbuild-7\n", softHolder, 17, "build-7", 0, ""},
		{"escaped host, pid namespace", "17\nmy?20box?3f?pidns-f0000123\n", softHolder, 17, "my box?", 0xf0000123, ""},
		{"empty host name", "17\n?\n", softHolder, 17, "?", 0, ""},
		{"host cut by filelock's digest", "17\nbox?pidns-f00-1a2b3c4d\n", softHolder, 17, "box?pidns-f00-1a2b3c4d", 0, ""},
		{"marker", "filelock/2\npid=9\nhost=build-7\nmode=exclusive\nstart=12\n", softHolder, 9, "build-7", 0, "12"},
		{"lease", "filelock/2\npid=9\nhost=build-7\nmode=lease\ntoken=ab\nduration=30.0\n", softHolder, 9, "build-7", 0, ""},
		{"lease without duration", "filelock/2\npid=9\nhost=build-7\nmode=lease\ntoken=ab\n", softNone, 0, "", 0, ""},
		{"newer mode", "filelock/2\npid=9\nhost=build-7\nmode=shared\n", softUnjudged, 9, "build-7", 0, ""},
		{"strict sentinel", filelockStrictSentinel, softStrict, 0, "", 0, ""},
		{"released marker", filelockReleased, softLeftover, 0, "", 0, ""},
		{"break marker", "filelock/break\n4242\n", softLeftover, 0, "", 0, ""},
		{"being written: pid", "4242\n", softPartial, 0, "", 0, ""},
		{"being written: host", "4242\nbuil", softPartial, 0, "", 0, ""},
		{"being written: marker", "filelock/2\npid=9\nho", softPartial, 0, "", 0, ""},
		{"pid 0", "0\nbuild-7\n", softNone, 0, "", 0, ""},
		{"pid beyond 2^31-1", "2147483648\nbuild-7\n", softNone, 0, "", 0, ""},
		{"host with a space", "17\nbuild 7\n", softNone, 0, "", 0, ""},
		{"words", "hello\nworld\n", softNone, 0, "", 0, ""},
		{"four lines", "1\n2\n3\n4\n", softNone, 0, "", 0, ""},
		{"marker without mode", "filelock/2\npid=9\nhost=build-7\n", softNone, 0, "", 0, ""},
		{"start not a number", "17\nbuild-7\nsoon\n", softNone, 0, "", 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := parseFilelockSoft([]byte(c.content))
			if r.kind != c.kind {
				t.Fatalf("kind %d, want %d (%+v)", r.kind, c.kind, r)
			}
			if c.pid == 0 {
				return
			}
			if r.pid != c.pid || r.host != c.host || r.pidNS != c.ns {
				t.Fatalf("pid %d host %q ns %x, want %d %q %x", r.pid, r.host, r.pidNS, c.pid, c.host, c.ns)
			}
			if got := fmt.Sprint(r.start); (c.start == "" && r.start != nil) || (c.start != "" && got != c.start) {
				t.Fatalf("start %v, want %q", r.start, c.start)
			}
		})
	}
}

// A live filelock holder's file is a held lock, however old: hold waits
// for it, names its holder, never breaks it without --force, and takes the
// lock once the holder lets go.
func TestFilelockSoftHolderWaited(t *testing.T) {
	p := New(fastConfig())
	target := filepath.Join(t.TempDir(), "counter")
	path := target + ".lock"
	holder := startWorker(t, "softhold", envTarget+"="+path)
	holder.expect(t, "held")
	// filelock refreshes nothing: an old file proves nothing.
	backdate(t, path, time.Hour)
	e := mustBusy(t, p, path)
	if e.Holder == nil || e.Holder.Owner == nil || e.Holder.Owner.PID != holder.cmd.Process.Pid {
		t.Fatalf("busy error names holder %+v, want pid %d", e.Holder, holder.cmd.Process.Pid)
	}
	st, err := p.Inspect(path)
	if err != nil || st.State != lock.HeldExclusive || st.Holder == nil || st.Holder.Owner.PID != holder.cmd.Process.Pid {
		t.Fatalf("Inspect: %+v, %v", st, err)
	}
	if st.Holder.Owner.Protocol != "filelock" || st.Holder.Alive != lock.Alive {
		t.Fatalf("Inspect's holder: %+v", st.Holder)
	}
	if why := p.Describe(path); !strings.Contains(why, "filelock soft lock of pid "+strconv.Itoa(holder.cmd.Process.Pid)) {
		t.Fatalf("Describe: %q", why)
	}
	if _, err := p.Break(path, false); !errors.Is(err, lock.ErrBusy) {
		t.Fatalf("Break of a live filelock holder: %v", err)
	}
	waitsForHolder(t, p, request(path), holder)
}

// waitsForHolder checks that an Acquire of req with p, while holder (a
// live filelock holder) holds its path, is still waiting a second later
// (many times the stale time of fastConfig), and that it gets the lock
// once holder releases it.
func waitsForHolder(t *testing.T, p *Protocol, req *lock.Request, holder *worker) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		h, err := p.Acquire(ctx, req)
		if err == nil {
			err = h.Release()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("hold took a live filelock holder's lock (err %v)", err)
	case <-time.After(time.Second):
	}
	holder.stdin.Close()
	holder.expect(t, "released")
	if err := <-got; err != nil {
		t.Fatal(err)
	}
}

// A filelock holder that is gone (its pid dead, or reused by another
// process: the start time differs) is taken over at once.
func TestFilelockSoftDeadHolderTakenOver(t *testing.T) {
	p := New(Config{Stale: time.Hour, Grace: time.Hour})
	t.Run("killed", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "x.lock")
		holder := startWorker(t, "softhold", envTarget+"="+path)
		holder.expect(t, "held")
		holder.cmd.Process.Kill()
		holder.wait(t)
		h, err := p.TryAcquire(request(path))
		if err != nil {
			t.Fatalf("a dead filelock holder's lock was not taken over: %v", err)
		}
		if err := h.Release(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("pid reused", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("filelock records a start time hold compares on Linux only")
		}
		path := filepath.Join(t.TempDir(), "x.lock")
		// This process's pid with a start time that is not its own.
		tok, _ := new(big.Int).SetString(filelockStartToken(os.Getpid()), 10)
		tok.Add(tok, big.NewInt(1))
		writeSoft(t, path, strconv.Itoa(os.Getpid())+"\n"+filelockHostField()+"\n"+tok.String()+"\n")
		st, err := p.Inspect(path)
		if err != nil || st.State != lock.Stale {
			t.Fatalf("Inspect: %+v, %v", st, err)
		}
		h, err := p.TryAcquire(request(path))
		if err != nil {
			t.Fatal(err)
		}
		h.Release()
	})
}

// A filelock holder hold cannot ask about (another host) is never taken
// over, however old its file: filelock would not take it over either.
// Only --force removes it.
func TestFilelockSoftOtherHost(t *testing.T) {
	p := New(Config{Stale: time.Second, Grace: time.Second})
	for _, record := range []string{
		"4242\nnot-" + proc.Hostname() + "\n",
		"filelock/2\npid=4242\nhost=not-" + proc.Hostname() + "\nmode=exclusive\n",
		"filelock/2\npid=4242\nhost=" + filelockHostField() + "\nmode=shared\n",
	} {
		path := filepath.Join(t.TempDir(), "x.lock")
		writeSoft(t, path, record)
		backdate(t, path, 24*time.Hour)
		e := mustBusy(t, p, path)
		if !strings.Contains(e.Hint, "hold break --force") && !strings.Contains(p.Describe(path), "hold break --force") {
			t.Errorf("%q: nothing says how to remove it: %q / %q", record, e.Hint, p.Describe(path))
		}
		if _, err := p.Break(path, false); !errors.Is(err, lock.ErrBusy) {
			t.Fatalf("%q: Break: %v", record, err)
		}
		if _, err := p.Break(path, true); err != nil {
			t.Fatalf("%q: Break --force: %v", record, err)
		}
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%q: Break --force left it: %v", record, err)
		}
	}
}

// A lease (SoftFileLease) on another host is renewed by its holder: it is
// live while its file is younger than its duration, stale once older, as
// filelock judges it.
func TestFilelockSoftLeaseOtherHost(t *testing.T) {
	p := New(Config{Stale: time.Hour, Grace: 100 * time.Millisecond})
	path := filepath.Join(t.TempDir(), "x.lock")
	writeSoft(t, path, "filelock/2\npid=4242\nhost=not-"+proc.Hostname()+"\nmode=lease\ntoken=ab12\nduration=30.0\n")
	mustBusy(t, p, path)
	backdate(t, path, 31*time.Second)
	st, err := p.Inspect(path)
	if err != nil || st.State != lock.Stale {
		t.Fatalf("a lease not renewed for its duration: %+v, %v (%s)", st, err, p.Describe(path))
	}
	h, err := p.TryAcquire(request(path))
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
}

// What only looks like filelock's is still the user's, and so is a
// StrictSoftFileLock's sentinel, whose holder hold cannot know.
func TestFilelockSoftForeignStillRefused(t *testing.T) {
	p := New(Config{Stale: time.Second, Grace: time.Second})
	for _, c := range []struct{ content, hint string }{
		{filelockStrictSentinel, "StrictSoftFileLock"},
		{"12\nnot a host\n", "not a lock record"},
		{"hello\nworld\n", "not a lock record"},
		{"filelock/2\nhost=h\nmode=exclusive\n", "not a lock record"},
	} {
		path := filepath.Join(t.TempDir(), "x.lock")
		writeSoft(t, path, c.content)
		backdate(t, path, time.Hour)
		mustForeign(t, p, path, c.hint)
	}
}

// The start of a filelock record is waited on while it is young (filelock
// writes the rest a moment later), and is the user's once it is old: it is
// also what a pid file holds, which is never deleted.
func TestFilelockSoftPartialRecord(t *testing.T) {
	p := New(Config{Stale: 300 * time.Millisecond, Grace: 150 * time.Millisecond})
	for _, content := range []string{"4242\n", "4242\nbuild-", "filelock/2\npid=9\nho"} {
		path := filepath.Join(t.TempDir(), "x.lock")
		writeSoft(t, path, content)
		if e := mustBusy(t, p, path); !strings.Contains(e.Hint+p.Describe(path), "start of a filelock soft lock record") {
			t.Errorf("%q: young: %q / %q", content, e.Hint, p.Describe(path))
		}
		backdate(t, path, time.Hour)
		mustForeign(t, p, path, "pid file")
	}
}

// filelockWorker returns a starter for testdata/filelock/worker.py run by
// the Python of the virtual environment that holds filelock 4.3.1, or
// skips the test.
func filelockWorker(t *testing.T) func(args ...string) *worker {
	t.Helper()
	py, err := filepath.Abs(filepath.Join("..", "..", "python", ".venv-filelock", "bin", "python"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(py, "-c", "import filelock; print(filelock.__version__)").Output()
	if err != nil || strings.TrimSpace(string(out)) != "4.3.1" {
		testenv.MissingTool(t, "filelock 4.3.1", "no python/.venv-filelock with it: .ci/run makes it (PIP_PACKAGES)")
	}
	script, err := filepath.Abs(filepath.Join("testdata", "filelock", "worker.py"))
	if err != nil {
		t.Fatal(err)
	}
	return func(args ...string) *worker {
		return startCmd(t, exec.Command(py, append([]string{script}, args...)...))
	}
}

// Real: hold waits for filelock's SoftFileLock, and gets the lock when
// filelock releases it.
func TestFilelockRealHolderWaited(t *testing.T) {
	fl := filelockWorker(t)
	path := filepath.Join(t.TempDir(), "x.lock")
	holder := fl("hold", path)
	holder.expect(t, "held")
	// The record the other tests write is the one filelock writes (on
	// Linux: elsewhere its start time is another clock's, which hold does
	// not compare).
	if b, err := os.ReadFile(path); runtime.GOOS == "linux" && (err != nil || string(b) != filelockRecord(holder.cmd.Process.Pid)) {
		t.Fatalf("filelock wrote %q (%v), the tests write %q", b, err, filelockRecord(holder.cmd.Process.Pid))
	}
	p := New(fastConfig())
	if e := mustBusy(t, p, path); e.Holder == nil || e.Holder.Owner == nil || e.Holder.Owner.PID != holder.cmd.Process.Pid {
		t.Fatalf("busy error names %+v, want pid %d", e.Holder, holder.cmd.Process.Pid)
	}
	waitsForHolder(t, p, request(path), holder)
}

// Real: a SIGKILLed filelock holder's file is taken over at once.
func TestFilelockRealHolderKilled(t *testing.T) {
	killedFilelockTakenOver(t, filelockWorker(t), request)
}

// killedFilelockTakenOver has a filelock worker (fl) hold a lock file and
// SIGKILLs it; a try of the request req makes for that path, with stale
// and grace times of an hour, must take the lock over at once.
func killedFilelockTakenOver(t *testing.T, fl func(args ...string) *worker, req func(path string) *lock.Request) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.lock")
	holder := fl("hold", path)
	holder.expect(t, "held")
	holder.cmd.Process.Kill()
	holder.wait(t)
	h, err := New(Config{Stale: time.Hour, Grace: time.Hour}).TryAcquire(req(path))
	if err != nil {
		t.Fatalf("a dead filelock holder's lock was not taken over: %v", err)
	}
	h.Release()
}

// Real: filelock's SoftFileLock never gets in while hold holds the lock
// (it cannot wait on a directory: the worker retries its
// IsADirectoryError), and gets it once hold releases.
func TestFilelockRealExcludedByHold(t *testing.T) {
	fl := filelockWorker(t)
	target := filepath.Join(t.TempDir(), "counter")
	h, err := New(fastConfig()).TryAcquire(request(target + ".lock"))
	if err != nil {
		t.Fatal(err)
	}
	waiter := fl("count", target, "1")
	time.Sleep(time.Second)
	select {
	case <-waiter.done:
		t.Fatalf("the filelock worker finished while hold held the lock: %v\n%s", waiter.err, waiter.stderr)
	default:
	}
	if n := readCounter(target); n != 0 {
		t.Fatalf("counter %d written while hold held the lock", n)
	}
	if err := h.Release(); err != nil {
		t.Fatal(err)
	}
	if err := waiter.wait(t); err != nil {
		t.Fatalf("filelock worker: %v\n%s", err, waiter.stderr)
	}
	if n := checkCount(t, target); n != 1 {
		t.Fatalf("count %d, want 1", n)
	}
}

// Real: filelock and hold workers increment one counter together: the
// exact count, no value written twice, no two holders at once.
func TestFilelockRealCounter(t *testing.T) {
	fl := filelockWorker(t)
	const iters = 25
	target := filepath.Join(t.TempDir(), "counter")
	var ws []*worker
	for range 2 {
		ws = append(ws, fl("count", target, strconv.Itoa(iters)))
		ws = append(ws, startWorker(t, "count", envTarget+"="+target, envIters+"="+strconv.Itoa(iters)))
	}
	for _, w := range ws {
		if err := w.wait(t); err != nil {
			t.Fatalf("%v: %v\n%s", w.cmd.Args, err, w.stderr)
		}
	}
	if n := checkCount(t, target); n != 4*iters {
		t.Fatalf("count %d, want %d", n, 4*iters)
	}
}
