package postgres_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/postgres"
)

// The environment of a worker process.
const (
	envConn = "HOLD_PG_TEST_CONN"
	envName = "HOLD_PG_TEST_NAME"
)

// runWorker plays a role in a re-executed test binary and returns its exit
// status.
func runWorker(role string) int {
	var err error
	switch role {
	case "hold-forever":
		err = holdForever()
	case "hold-until-lost":
		err = holdUntilLost()
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
	return testenv.Command(append([]string{workerEnv + "=" + role,
		envConn + "=" + needServer(t).ConnString(), envName + "=" + name}, env...)...)
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
