package etcd_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/etcd"
)

// runWorker plays a role in a re-executed test binary and returns its exit
// status.
func runWorker(role string) int {
	switch role {
	case "counter":
		if err := counterWorker(); err != nil {
			fmt.Fprintln(os.Stderr, "counter worker:", err)
			return 1
		}
		return 0
	case "hold-forever":
		// Take the lock with a 1 s lease, say so, and wait to be killed.
		ctx := context.Background()
		p, err := etcd.Dial(ctx, etcd.Config{Endpoints: []string{os.Getenv("HOLD_ETCD_TEST_ENDPOINT")}}, etcd.WithTTL(time.Second))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		l, err := hold.Acquire(ctx, "", hold.WithProtocol(p), hold.LockFile(os.Getenv("HOLD_ETCD_TEST_KEY")))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("held", l.Token())
		time.Sleep(time.Minute)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown worker role", role)
	return 2
}

// counterWorker increments the counter file N times under the lock and logs
// each acquisition's fencing token, in lock order, to the token log.
func counterWorker() error {
	n, err := strconv.Atoi(os.Getenv("HOLD_ETCD_TEST_N"))
	if err != nil {
		return err
	}
	dir := os.Getenv("HOLD_ETCD_TEST_DIR")
	key := os.Getenv("HOLD_ETCD_TEST_KEY")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := etcd.Dial(ctx, etcd.Config{Endpoints: []string{os.Getenv("HOLD_ETCD_TEST_ENDPOINT")}})
	if err != nil {
		return err
	}
	defer p.Close()
	counter := filepath.Join(dir, "counter")
	tokens := filepath.Join(dir, "tokens")
	for i := 0; i < n; i++ {
		l, err := hold.Acquire(ctx, "", hold.WithProtocol(p), hold.LockFile(key))
		if err != nil {
			return err
		}
		b, err := os.ReadFile(counter)
		if err != nil {
			return err
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return fmt.Errorf("counter file holds %q: %v", b, err)
		}
		if err := os.WriteFile(counter, []byte(strconv.Itoa(v+1)), 0o644); err != nil {
			return err
		}
		f, err := os.OpenFile(tokens, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		fmt.Fprintf(f, "%d %d\n", l.Token(), os.Getpid())
		f.Close()
		if err := l.Release(); err != nil {
			return err
		}
	}
	return nil
}

// TestKilledHolder: a holder process killed with SIGKILL cannot release;
// its lease expires within its TTL and the next waiter gets the lock, with a
// larger token.
func TestKilledHolder(t *testing.T) {
	key := uniqueKey(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"=hold-forever", "HOLD_ETCD_TEST_KEY="+key, "HOLD_ETCD_TEST_ENDPOINT="+testEndpoint)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("holder process: %v", err)
	}
	var old uint64
	if _, err := fmt.Sscanf(line, "held %d", &old); err != nil {
		t.Fatalf("holder process said %q", line)
	}
	p := dial(t)
	if _, err := hold.TryAcquire("", lockOpts(p, key)...); !errors.Is(err, hold.ErrBusy) {
		t.Fatalf("TryAcquire while the other process holds = %v, want ErrBusy", err)
	}
	cmd.Process.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	l, err := hold.Acquire(ctx, "", lockOpts(p, key)...)
	if err != nil {
		t.Fatalf("lock of a killed holder never came free: %v", err)
	}
	defer l.Release()
	t.Logf("lock free %s after the holder was killed (lease TTL 1s)", time.Since(start).Round(time.Millisecond))
	if l.Token() <= old {
		t.Errorf("token %d after the killed holder's %d", l.Token(), old)
	}
}

// TestCounterProcesses: 8 processes x 100 increments of a file under one etcd
// lock lose no update, and the fencing tokens grow strictly in the order the
// lock was taken.
func TestCounterProcesses(t *testing.T) {
	const procs, each = 8, 100
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "counter"), []byte("0"), 0o644); err != nil {
		t.Fatal(err)
	}
	key := uniqueKey(t)
	var wg sync.WaitGroup
	errs := make([]error, procs)
	outs := make([][]byte, procs)
	start := time.Now()
	for i := 0; i < procs; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), workerEnv+"=counter",
				"HOLD_ETCD_TEST_N="+strconv.Itoa(each), "HOLD_ETCD_TEST_DIR="+dir,
				"HOLD_ETCD_TEST_KEY="+key, "HOLD_ETCD_TEST_ENDPOINT="+testEndpoint)
			outs[i], errs[i] = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	for i := range errs {
		if errs[i] != nil {
			t.Fatalf("worker %d: %v\n%s", i, errs[i], outs[i])
		}
	}
	t.Logf("%d processes x %d acquisitions in %s", procs, each, time.Since(start))
	b, err := os.ReadFile(filepath.Join(dir, "counter"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != strconv.Itoa(procs*each) {
		t.Errorf("counter = %s, want %d: updates were lost", got, procs*each)
	}
	f, err := os.Open(filepath.Join(dir, "tokens"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var last uint64
	lines := 0
	pids := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		tok, pid, _ := strings.Cut(sc.Text(), " ")
		v, err := strconv.ParseUint(tok, 10, 64)
		if err != nil {
			t.Fatalf("token log line %q", sc.Text())
		}
		if v <= last {
			t.Fatalf("token %d after %d at line %d: tokens must grow strictly in lock order", v, last, lines+1)
		}
		last = v
		lines++
		pids[pid] = true
	}
	if lines != procs*each {
		t.Errorf("token log has %d lines, want %d", lines, procs*each)
	}
	if len(pids) != procs {
		t.Errorf("tokens from %d processes, want %d", len(pids), procs)
	}
}
