//go:build unix

package cli

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestUpdateTargetNotRegularExit66: every kind of target that is not a
// regular file gets the one documented status, 66, from update and
// append alike.
func TestUpdateTargetNotRegularExit66(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "adir"), 0o755)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock, err := net.Listen("unix", filepath.Join(dir, "sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	for _, target := range []string{"adir", "fifo", "sock", "/dev/null"} {
		for _, args := range [][]string{{"update", target, "--", "cat"}, {"append", target, "text"}} {
			if r := runHold(t, dir, args...); r.code != exitCannotOpen {
				t.Errorf("hold %v: exit %d, want %d: %s", args, r.code, exitCannotOpen, r.stderr)
			}
		}
	}
}

// TestWaitShorterThanOneAttempt: -w bounds the wait, not the attempt, so
// a free lock is taken whatever -w says, as -n takes it.
func TestWaitShorterThanOneAttempt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, proto := range []string{"flock", "dir"} {
		for _, args := range [][]string{{"-n"}, {"-w", "0.000001"}, {"-w", "1e-9"}, {"-w", "0.000001", "--fair"}} {
			args = append(append([]string{"run", "--protocol", proto}, args...), "T-"+proto, "--", "echo", "ran")
			r := runHold(t, dir, args...)
			if r.code != 0 || strings.TrimSpace(r.stdout) != "ran" {
				t.Errorf("hold %v on a free lock: exit %d: %s%s", args, r.code, r.stdout, r.stderr)
			}
		}
	}
}

// TestWaitBoundsDial: -w bounds connecting to a network backend too. The
// "server" accepts connections and never answers, so only a timeout ends
// the dial; with -w 0.3 it must end long before the backends' own 5 s
// bound (the limit here only separates the two, generously).
func TestWaitBoundsDial(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	addr := ln.Addr().String()
	for _, target := range []string{"etcd://" + addr + "/locks/k", "postgres://u@" + addr + "/db#k"} {
		start := time.Now()
		r := runHold(t, t.TempDir(), "run", "-w", "0.3", target, "--", "true")
		took := time.Since(start)
		if r.code == 0 {
			t.Errorf("hold run %s against a silent server: exit 0", target)
		}
		if took > 3*time.Second {
			t.Errorf("hold run -w 0.3 %s took %v to give up on a silent server: %s", target, took, r.stderr)
		}
	}
}

// TestNamedLocksInTestDirectory: the tests' named locks go to a directory
// of the test binary's own (testenv.Run), never the user's.
func TestNamedLocksInTestDirectory(t *testing.T) {
	t.Parallel()
	run := os.Getenv("HOLD_TEST_NAMED_DIR")
	if !strings.Contains(run, "hold-test-run-") {
		t.Fatalf("HOLD_TEST_NAMED_DIR = %q: named locks would go to the user's directory", run)
	}
	name := fmt.Sprintf("cli-test-%d", os.Getpid())
	if r := runHold(t, t.TempDir(), "run", "--name", name, "--", "true"); r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(run, name+".lock")); err != nil {
		t.Errorf("the named lock is not in the test's directory: %v", err)
	}
}
