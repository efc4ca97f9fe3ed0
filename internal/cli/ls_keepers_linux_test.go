package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/portable"
)

func init() { testRoles["hold-many"] = holdManyRole }

// holdManyRole holds HOLD_CLI_TEST_N locks in its working directory, each
// through its own descriptor: with the library (owner records) or, with
// HOLD_CLI_TEST_RAW=1, with bare flock(2) on empty files (no record, as
// flock(1) holds them). It writes "ready" and holds them until killed, its
// parent ends, or HOLD_CLI_TEST_HOLD has passed.
func holdManyRole() int {
	n, _ := strconv.Atoi(os.Getenv("HOLD_CLI_TEST_N"))
	raw := os.Getenv("HOLD_CLI_TEST_RAW") == "1"
	var keep []any
	for i := range n {
		name := fmt.Sprintf("l%04d", i)
		if raw {
			f, err := os.OpenFile(name+".lock", os.O_RDWR|os.O_CREATE, 0o644)
			if err == nil {
				err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "flock:", err)
				return 2
			}
			keep = append(keep, f)
			continue
		}
		l, err := hold.TryAcquire(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "acquire:", err)
			return 2
		}
		// The record is written lazily, a few ms into a hold, or when the
		// token is asked for: now, so that every lock names its holder.
		if l.Token() == 0 {
			fmt.Fprintln(os.Stderr, "token:", l.TokenError())
			return 2
		}
		keep = append(keep, l)
	}
	os.WriteFile("ready", nil, 0o644)
	if d, err := time.ParseDuration(os.Getenv("HOLD_CLI_TEST_HOLD")); err == nil {
		time.Sleep(d)
		return 0
	}
	// Until the test that started it ends (an hour at most).
	for parent, start := os.Getppid(), time.Now(); os.Getppid() == parent && time.Since(start) < time.Hour; {
		time.Sleep(time.Second)
	}
	_ = keep
	return 0
}

// listHeldByOne lists n locks that one helper process holds (raw: bare
// flocks without records), in this process with --json, and returns what
// was listed, the helper's pid, and how many times the listing read,
// listed or stat'ed something of the helper's under /proc.
func listHeldByOne(t *testing.T, n int, raw bool) (lines []map[string]any, pid int, reads int64) {
	t.Helper()
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), roleEnv+"=hold-many", "HOLD_CLI_TEST_N="+strconv.Itoa(n))
	if raw {
		cmd.Env = append(cmd.Env, "HOLD_CLI_TEST_RAW=1")
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitFor(t, filepath.Join(dir, "ready"))
	pid = cmd.Process.Pid

	prefix := "/proc/" + strconv.Itoa(pid) + "/"
	var count atomic.Int64
	restore := proc.CountReads(func(path string) {
		if strings.HasPrefix(path, prefix) {
			count.Add(1)
		}
	})
	var out bytes.Buffer
	release := proc.ShareLockTable()
	l := &lister{out: &out, asJSON: true, portable: portable.New(), kernel: &kernelTable{}}
	if err := l.listDir(dir); err != nil {
		t.Fatal(err)
	}
	code := l.finish()
	release()
	restore()
	if code != 0 {
		t.Fatalf("ls: exit %d", code)
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		lines = append(lines, m)
	}
	return lines, pid, count.Load()
}

// One process holding many locks through as many descriptors is listed
// with each lock's holder named, and its descriptors are read once for
// the listing, not once per lock (issue 57: 5,000 such locks stat'ed 12.5
// million descriptors): the /proc reads of the holder grow linearly with
// the number of locks. Counted, not timed.
func TestLsManyHeldByOneProcessIsLinear(t *testing.T) {
	for _, raw := range []bool{false, true} {
		t.Run(map[bool]string{false: "library", true: "flock"}[raw], func(t *testing.T) {
			counts := map[int]int64{}
			for _, n := range []int{200, 400} {
				lines, pid, reads := listHeldByOne(t, n, raw)
				if len(lines) != n {
					t.Fatalf("%d held locks: ls listed %d", n, len(lines))
				}
				for _, m := range lines {
					checkNamed(t, m, pid, raw)
				}
				counts[n] = reads
				t.Logf("%d locks held by one process: %d reads under /proc/%d", n, reads, pid)
			}
			if counts[200] == 0 || float64(counts[400]) > 2.2*float64(counts[200]) {
				t.Fatalf("/proc reads of the holder: %d for 200 locks, %d for 400: not linear", counts[200], counts[400])
			}
		})
	}
}

// checkNamed checks that the listed lock m is held exclusively by pid:
// by its record (library), or by the kernel's table and as its only
// opener (raw flock, which writes no record).
func checkNamed(t *testing.T, m map[string]any, pid int, raw bool) {
	t.Helper()
	if m["state"] != "held exclusive" {
		t.Fatalf("%v: state %v, want held exclusive", m["lock_file"], m["state"])
	}
	b, _ := json.Marshal(m)
	if !raw {
		holder, _ := m["holder"].(map[string]any)
		if holder == nil {
			t.Fatalf("%v: no holder: %s", m["lock_file"], b)
		}
		if got, _ := holder["pid"].(float64); int(got) != pid {
			t.Fatalf("%v: holder pid %v, want %d: %s", m["lock_file"], holder["pid"], pid, b)
		}
		return
	}
	kp, _ := m["kernel_pids"].([]any)
	op, _ := m["openers"].([]any)
	// The kernel serves /proc/locks a page per read and finds its place
	// again by counting lines, so a lock released elsewhere on the
	// machine meanwhile can hide one of ours from the reading: a missing
	// pid is not the listing's fault, a wrong one would be.
	if len(kp) > 1 || len(kp) == 1 && int(kp[0].(float64)) != pid {
		t.Fatalf("%v: kernel pids %v, want [%d]: %s", m["lock_file"], kp, pid, b)
	}
	if len(op) != 1 || int(op[0].(map[string]any)["pid"].(float64)) != pid {
		t.Fatalf("%v: openers %v, want pid %d alone: %s", m["lock_file"], op, pid, b)
	}
}
