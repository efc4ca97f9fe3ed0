package postgres_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/postgres"
)

// The environment of a worker process.
const (
	envConn = "HOLD_PG_TEST_CONN"
	envName = "HOLD_PG_TEST_NAME"
	envDir  = "HOLD_PG_TEST_DIR"
	envN    = "HOLD_PG_TEST_N"
)

// runWorker plays a role in a re-executed test binary and returns its exit
// status.
func runWorker(role string) int {
	var err error
	switch role {
	case "counter":
		err = counterWorker()
	case "hold-forever":
		err = holdForever()
	case "naive-cli":
		err = naiveCLI(false)
	case "naive-cli-run":
		err = naiveCLI(true)
	default:
		err = fmt.Errorf("unknown worker role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s worker: %v\n", role, err)
		return 1
	}
	return 0
}

// counterWorker increments the counter file N times under the lock and
// logs each acquisition's fencing token, in lock order, to the token log.
func counterWorker() error {
	n, err := strconv.Atoi(os.Getenv(envN))
	if err != nil {
		return err
	}
	dir := os.Getenv(envDir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, err := postgres.Dial(ctx, os.Getenv(envConn))
	if err != nil {
		return err
	}
	defer p.Close()
	opts := []hold.Option{hold.WithProtocol(p), hold.LockFile(os.Getenv(envName))}
	for i := 0; i < n; i++ {
		l, err := hold.Acquire(ctx, "", opts...)
		if err != nil {
			return err
		}
		if err := incrementCounter(dir, l.Token()); err != nil {
			return err
		}
		if err := l.Release(); err != nil {
			return err
		}
	}
	return nil
}

// incrementCounter adds one to dir/counter and appends "TOKEN PID" to
// dir/tokens: what a worker does under the lock.
func incrementCounter(dir string, token uint64) error {
	counter := filepath.Join(dir, "counter")
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
	f, err := os.OpenFile(filepath.Join(dir, "tokens"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "%d %d\n", token, os.Getpid())
	return f.Close()
}

// holdForever takes the lock, says "held TOKEN", and waits to be killed.
func holdForever() error {
	ctx := context.Background()
	p, err := postgres.Dial(ctx, os.Getenv(envConn))
	if err != nil {
		return err
	}
	l, err := hold.Acquire(ctx, "", hold.WithProtocol(p), hold.LockFile(os.Getenv(envName)))
	if err != nil {
		return err
	}
	fmt.Println("held", l.Token())
	time.Sleep(time.Minute)
	return nil
}

// worker returns a command running this test binary in a worker role.
func worker(t testing.TB, role, name string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{workerEnv + "=" + role,
		envConn + "=" + needServer(t).ConnString(), envName + "=" + name}, env...)...)
	return cmd
}

// startHolder starts a hold-forever worker and returns it once it holds
// name, with its token.
func startHolder(t *testing.T, name string) (*exec.Cmd, uint64) {
	t.Helper()
	cmd := worker(t, "hold-forever", name)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("holder process: %v", err)
	}
	var token uint64
	if _, err := fmt.Sscanf(line, "held %d", &token); err != nil {
		t.Fatalf("holder process said %q", line)
	}
	return cmd, token
}

// checkTokenLog checks dir/tokens: want lines whose tokens grow strictly,
// from at least minPIDs processes.
func checkTokenLog(t *testing.T, dir string, want, minPIDs int) {
	t.Helper()
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
	if lines != want {
		t.Errorf("token log has %d lines, want %d", lines, want)
	}
	if len(pids) < minPIDs {
		t.Errorf("tokens from %d processes, want %d", len(pids), minPIDs)
	}
}
