package hold_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/testenv"
)

// Worker roles of the kernel-lock tests. A test starts the test binary
// again with HOLD_TEST_WORKER set to a role (see worker_main_test.go);
// parameters travel in CORE_* environment variables and a worker reports
// on stdout as one JSON line.

func init() {
	hold.RegisterWorker("core-hold", coreHoldWorker)
}

// coreReport is what a core-hold worker prints once it has (or failed to
// get) the lock.
type coreReport struct {
	PID        int    `json:"pid"`
	Token      uint64 `json:"token"`
	Err        string `json:"err,omitempty"`
	Busy       bool   `json:"busy,omitempty"`
	Permission bool   `json:"permission,omitempty"`
	HolderPID  int    `json:"holder_pid,omitempty"`
	IsHoldErr  bool   `json:"is_hold_error,omitempty"`
}

// incrementFile is the unprotected read-modify-write the lock must guard:
// read the number, yield, write the number plus one in place.
func incrementFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	v := 0
	if s := strings.TrimSpace(string(b)); s != "" {
		if v, err = strconv.Atoi(s); err != nil {
			return fmt.Errorf("counter file holds %q: %w", s, err)
		}
	}
	time.Sleep(0) // give a racing writer every chance to interleave
	return os.WriteFile(path, []byte(strconv.Itoa(v+1)+"\n"), 0o644)
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(line + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// coreHoldWorker takes the lock on CORE_TARGET and keeps it until told:
//
//	CORE_SHARED=1     take a shared lock
//	CORE_LOCKFILE     use exactly this lock file
//	CORE_TRY=1        TryAcquire instead of waiting
//	CORE_NO_TOKEN=1   never ask for the token (nor anything that writes
//	                  the record)
//	CORE_ABSENT       a file that must not exist once the lock is held (an
//	                  exclusive holder's marker): exit 4 if it does
//	CORE_MARK         a file to create while holding (removed before release)
//	CORE_OVERLAP_DIR  create in-<pid> there and wait until CORE_OVERLAP_N
//	                  such files exist at once: proof that the holders
//	                  overlap (exit 3 if they never do)
//	CORE_RELEASE      "now": release at once; a path: release once it
//	                  exists; empty: hold until killed
func coreHoldWorker() int {
	target := os.Getenv("CORE_TARGET")
	var opts []hold.Option
	if os.Getenv("CORE_SHARED") == "1" {
		opts = append(opts, hold.Shared())
	}
	if lf := os.Getenv("CORE_LOCKFILE"); lf != "" {
		opts = append(opts, hold.LockFile(lf))
	}
	if warm := os.Getenv("CORE_WARM"); warm != "" {
		// A process's first kernel lock writes its record at once; a
		// hold on another file first makes the next one lazy.
		w, err := hold.TryAcquire(warm)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		w.Release()
	}
	rep := coreReport{PID: os.Getpid()}
	out := json.NewEncoder(os.Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var l *hold.Lock
	var err error
	if os.Getenv("CORE_TRY") == "1" {
		l, err = hold.TryAcquire(target, opts...)
	} else {
		l, err = hold.Acquire(ctx, target, opts...)
	}
	if err != nil {
		rep.Err = err.Error()
		rep.Busy = errors.Is(err, hold.ErrBusy)
		rep.Permission = errors.Is(err, os.ErrPermission)
		var he *hold.Error
		if errors.As(err, &he) {
			rep.IsHoldErr = true
			switch h := he.Holder; {
			case h != nil && h.Owner != nil:
				rep.HolderPID = h.Owner.PID
			case h != nil && len(h.PIDs) == 1:
				// A holder whose record is not written yet (a lazy
				// kernel lock) is named by the kernel's pid.
				rep.HolderPID = h.PIDs[0]
			}
		}
		out.Encode(rep)
		return 2
	}
	if os.Getenv("CORE_NO_TOKEN") != "1" {
		rep.Token = l.Token()
	}
	if p := os.Getenv("CORE_ABSENT"); p != "" {
		if _, err := os.Stat(p); err == nil {
			rep.Err = "acquired while " + p + " exists"
			out.Encode(rep)
			return 4
		}
	}
	if p := os.Getenv("CORE_MARK"); p != "" {
		if err := os.WriteFile(p, []byte(strconv.FormatUint(l.Token(), 10)), 0o644); err != nil {
			rep.Err = err.Error()
			out.Encode(rep)
			return 5
		}
		defer os.Remove(p)
	}
	if dir := os.Getenv("CORE_OVERLAP_DIR"); dir != "" {
		// in-<pid> says "inside now" and goes before release; seen-<pid>
		// stays, so that the barrier below cannot strand a holder that
		// is slower to look than the others are to leave.
		want, _ := strconv.Atoi(os.Getenv("CORE_OVERLAP_N"))
		in := filepath.Join(dir, fmt.Sprintf("in-%d", os.Getpid()))
		seen := filepath.Join(dir, fmt.Sprintf("seen-%d", os.Getpid()))
		for _, p := range []string{in, seen} {
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				rep.Err = err.Error()
				out.Encode(rep)
				return 5
			}
		}
		defer os.Remove(in)
		for {
			// Count the holders inside right now, and those that were
			// inside and have left: the latter can only have left after
			// seeing everybody inside at once.
			ins, _ := filepath.Glob(filepath.Join(dir, "in-*"))
			seens, _ := filepath.Glob(filepath.Join(dir, "seen-*"))
			if len(ins) >= want || (len(seens) >= want && len(seens) > len(ins)) {
				break
			}
			if ctx.Err() != nil {
				rep.Err = fmt.Sprintf("only %d of %d holders inside at once", len(ins), want)
				out.Encode(rep)
				return 3
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	out.Encode(rep)
	switch rel := os.Getenv("CORE_RELEASE"); rel {
	case "now":
	case "":
		select {}
	default:
		for {
			if _, err := os.Stat(rel); err == nil {
				break
			}
			if ctx.Err() != nil {
				return 6
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	// Remove the markers before letting go, so that whoever gets the lock
	// next can check they are gone.
	if p := os.Getenv("CORE_MARK"); p != "" {
		os.Remove(p)
	}
	if dir := os.Getenv("CORE_OVERLAP_DIR"); dir != "" {
		os.Remove(filepath.Join(dir, fmt.Sprintf("in-%d", os.Getpid())))
	}
	if err := l.Release(); err != nil {
		return 7
	}
	return 0
}

// coreWorker is a running worker process.
type coreWorker struct {
	cmd  *exec.Cmd
	out  *hold.LockedBuffer
	done chan struct{}
	err  error // the exit error, valid once done is closed
}

// startCoreWorker starts the test binary in role with env added to its
// environment. The worker is killed when the test ends.
func startCoreWorker(t testing.TB, role string, env ...string) *coreWorker {
	t.Helper()
	return startCoreWorkerCmd(t, testenv.Command(), role, env...)
}

// startCoreWorkerCmd starts cmd, a test binary (this one, or a copy
// another user may run), in role.
func startCoreWorkerCmd(t testing.TB, cmd *exec.Cmd, role string, env ...string) *coreWorker {
	t.Helper()
	cmd.Env = append(append(cmd.Environ(), hold.WorkerEnv+"="+role), env...)
	w := &coreWorker{cmd: cmd, out: new(hold.LockedBuffer), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = w.out, w.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.err = cmd.Wait(); close(w.done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-w.done
	})
	return w
}

// wait waits (at most bound, to catch hangs) for the worker to exit and
// returns its exit error.
func (w *coreWorker) wait(t testing.TB, bound time.Duration) error {
	t.Helper()
	select {
	case <-w.done:
		return w.err
	case <-time.After(bound):
		quitForDump(w.cmd.Process)
		select {
		case <-w.done:
		case <-time.After(2 * time.Second):
		}
		t.Fatalf("worker %d still running after %v; output:\n%s", w.cmd.Process.Pid, bound, w.out.String())
		return nil
	}
}

// report waits (at most bound) for the worker's JSON report.
func (w *coreWorker) report(t testing.TB, bound time.Duration) coreReport {
	t.Helper()
	deadline := time.Now().Add(bound)
	for {
		sc := bufio.NewScanner(strings.NewReader(w.out.String()))
		for sc.Scan() {
			var r coreReport
			if line := sc.Bytes(); len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &r) == nil {
				return r
			}
		}
		select {
		case <-w.done:
			// One more look: the report may have come with the exit.
			sc := bufio.NewScanner(strings.NewReader(w.out.String()))
			for sc.Scan() {
				var r coreReport
				if line := sc.Bytes(); len(line) > 0 && line[0] == '{' && json.Unmarshal(line, &r) == nil {
					return r
				}
			}
			t.Fatalf("worker %d exited (%v) without a report; output:\n%s", w.cmd.Process.Pid, w.err, w.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no report from worker %d within %v; output:\n%s", w.cmd.Process.Pid, bound, w.out.String())
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// hangBound bounds every wait in these tests. It is far above anything a
// working lock needs even on a loaded machine under -race: it only turns a
// hang into a failure.
const hangBound = 30 * time.Second
