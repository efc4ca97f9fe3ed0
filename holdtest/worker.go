package holdtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/testenv"
)

// Worker processes are the test binary run again with workerEnv set to
// "SUBJECT/ROLE"; their parameters are environment variables too, and
// they report to their standard output, one JSON object a line.
const (
	workerEnv = "HOLDTEST_WORKER"
	targetEnv = "HOLDTEST_TARGET"
	countEnv  = "HOLDTEST_COUNT"  // the counter file
	logEnv    = "HOLDTEST_LOG"    // the token log
	nEnv      = "HOLDTEST_N"      // increments
	sharedEnv = "HOLDTEST_SHARED" // "1" for a shared hold
)

// hangBound bounds every wait on a worker: it only catches hangs.
const hangBound = 60 * time.Second

// report is what a worker prints.
type report struct {
	PID   int    `json:"pid"`
	Held  bool   `json:"held,omitempty"`
	Token uint64 `json:"token,omitempty"`
	Busy  bool   `json:"busy,omitempty"`
	Err   string `json:"err,omitempty"`
	// HolderPID is the pid a busy error named, 0 if none.
	HolderPID int `json:"holder_pid,omitempty"`
	// Protocol is the held lock's Protocol.
	Protocol string `json:"protocol,omitempty"`
}

// holderPID returns the pid a busy error names, 0 if none: the owner
// record's, or else the first the kernel vouches for.
func holderPID(err error) int {
	var he *hold.Error
	if !errors.As(err, &he) || he.Holder == nil {
		return 0
	}
	if he.Holder.Owner != nil {
		return he.Holder.Owner.PID
	}
	if len(he.Holder.PIDs) > 0 {
		return he.Holder.PIDs[0]
	}
	return 0
}

// RunWorker runs this process as the worker that Run started, if it is
// one: it returns the exit status and true. Otherwise it returns false at
// once, and the caller goes on to run the tests. Pass every subject the
// package's tests give Run.
func RunWorker(subjects ...Subject) (code int, ok bool) {
	role := os.Getenv(workerEnv)
	if role == "" {
		return 0, false
	}
	name, role, _ := strings.Cut(role, "/")
	for _, s := range subjects {
		if s.Name == name {
			return s.work(role), true
		}
	}
	fmt.Fprintf(os.Stderr, "holdtest: no subject %q among those given RunWorker\n", name)
	return 70, true
}

func (s Subject) work(role string) int {
	opts, closeFn, err := s.options()
	if err != nil {
		fmt.Fprintln(os.Stderr, "holdtest worker:", err)
		return 71
	}
	defer closeFn()
	if os.Getenv(sharedEnv) == "1" {
		opts = append(opts, hold.Shared())
	}
	target := os.Getenv(targetEnv)
	out := json.NewEncoder(os.Stdout)
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	switch role {
	case "count":
		n, _ := strconv.Atoi(os.Getenv(nEnv))
		for range n {
			if err := countOnce(ctx, target, opts); err != nil {
				fmt.Fprintln(os.Stderr, "holdtest worker:", err)
				return 1
			}
		}
		return 0
	case "hold":
		// Hold the lock until standard input closes (or says anything).
		l, err := hold.Acquire(ctx, target, opts...)
		if err != nil {
			out.Encode(report{PID: os.Getpid(), Err: err.Error()})
			return 1
		}
		out.Encode(report{PID: os.Getpid(), Held: true, Token: l.Token(), Protocol: l.Protocol()})
		io.ReadAll(io.LimitReader(os.Stdin, 1))
		if err := l.Release(); err != nil {
			fmt.Fprintln(os.Stderr, "holdtest worker: release:", err)
			return 1
		}
		return 0
	case "try":
		l, err := hold.TryAcquire(target, opts...)
		r := report{PID: os.Getpid()}
		if err != nil {
			r.Err, r.Busy, r.HolderPID = err.Error(), errors.Is(err, hold.ErrBusy), holderPID(err)
		} else {
			r.Held, r.Token = true, l.Token()
			l.Release()
		}
		out.Encode(r)
		return 0
	}
	if code, ok := s.slotWork(role, opts); ok {
		return code
	}
	fmt.Fprintf(os.Stderr, "holdtest: unknown worker role %q\n", role)
	return 70
}

// countOnce increments the counter file under the lock and, while still
// holding it, appends the acquisition's token to the log, so that the
// log's order is the order of acquisition.
func countOnce(ctx context.Context, target string, opts []hold.Option) error {
	l, err := hold.Acquire(ctx, target, opts...)
	if err != nil {
		return err
	}
	defer l.Release()
	counter := os.Getenv(countEnv)
	b, err := os.ReadFile(counter)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	// Read, pause, write: without exclusion, another worker's increment
	// falls in the gap and is lost.
	time.Sleep(100 * time.Microsecond)
	if err := os.WriteFile(counter, []byte(strconv.Itoa(n+1)+"\n"), 0o644); err != nil {
		return err
	}
	f, err := os.OpenFile(os.Getenv(logEnv), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	tok := uint64(0)
	if l.TokenError() == nil {
		tok = l.Token()
	}
	_, err = fmt.Fprintf(f, "%d %d\n", os.Getpid(), tok)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// worker is a running worker process.
type worker struct {
	role   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Scanner
	waited bool
	err    error
	// killedByTest: the test killed it on purpose.
	killedByTest bool
}

// start runs the test binary as the worker role of s, with env. The
// worker is waited for (and killed if it hangs) when the test ends.
func (s Subject) start(t *testing.T, role string, env ...string) *worker {
	t.Helper()
	cmd := testenv.Command(append(append([]string{workerEnv + "=" + s.Name + "/" + role}, s.Env...), env...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &worker{role: s.Name + "/" + role, cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	t.Cleanup(func() { w.wait() })
	return w
}

// report reads the worker's next report; a worker that gives none within
// hangBound is killed.
func (w *worker) report(t *testing.T) report {
	t.Helper()
	timer := time.AfterFunc(hangBound, func() { w.cmd.Process.Kill() })
	defer timer.Stop()
	var r report
	if !w.out.Scan() {
		t.Fatalf("worker %s gave no report (exited, or hung for %v)", w.role, hangBound)
	}
	if err := json.Unmarshal(w.out.Bytes(), &r); err != nil {
		t.Fatalf("worker's report %q: %v", w.out.Bytes(), err)
	}
	return r
}

// wait closes the worker's standard input (a holder then releases), and
// waits for it to exit; one that hangs for hangBound is killed.
func (w *worker) wait() error {
	if w.waited {
		return w.err
	}
	w.waited = true
	w.stdin.Close()
	timer := time.AfterFunc(hangBound, func() { w.cmd.Process.Kill() })
	defer timer.Stop()
	for w.out.Scan() {
	}
	w.err = w.cmd.Wait()
	return w.err
}

// kill kills the worker with SIGKILL and reaps it.
func (w *worker) kill() {
	w.cmd.Process.Kill()
	w.wait()
}
