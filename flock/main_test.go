package flock_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hold-dev/hold/flock"
	"github.com/hold-dev/hold/internal/testenv"
)

// The test binary doubles as the other process of the multi-process
// tests: with workerEnv set to "lock" or "rlock" it locks the path in
// workerPath that way, says "held", and unlocks when its stdin closes.
const (
	workerEnv  = "HOLD_FLOCK_TEST_WORKER"
	workerPath = "HOLD_FLOCK_TEST_PATH"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(workerEnv); mode != "" {
		os.Exit(worker(mode, os.Getenv(workerPath)))
	}
	os.Exit(testenv.Run(m))
}

func worker(mode, path string) int {
	f := flock.New(path)
	var err error
	switch mode {
	case "lock":
		err = f.Lock()
	case "rlock":
		err = f.RLock()
	default:
		err = fmt.Errorf("unknown worker mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := f.Unlock(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// holder is another process holding a lock until release is called.
type holder struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startHolder runs cmd, which must print "held" once it holds its lock,
// and returns once it has.
func startHolder(t *testing.T, cmd *exec.Cmd) *holder {
	t.Helper()
	cmd.Stderr = os.Stderr
	stdin, stdout := testenv.StartPiped(t, cmd)
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "held" {
		t.Fatalf("%s: said %q (%v), want held", cmd.Path, line, err)
	}
	h := &holder{cmd: cmd, stdin: stdin}
	t.Cleanup(h.release)
	return h
}

// release has the holder unlock and exit, and waits for it.
func (h *holder) release() {
	if h.stdin == nil {
		return
	}
	h.stdin.Close()
	h.stdin = nil
	_ = h.cmd.Wait()
}

// startWorker starts this test binary holding path in mode.
func startWorker(t *testing.T, mode, path string) *holder {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), workerEnv+"="+mode, workerPath+"="+path)
	return startHolder(t, cmd)
}
