package hold

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/atomicfile"
)

// Worker roles and helpers of the Update and Append tests. Parameters
// reach a worker through GUARDED_* environment variables.

func init() {
	RegisterWorker("guarded-append", appendWorker)
	RegisterWorker("guarded-increment", incrementWorker)
	RegisterWorker("guarded-flip", flipWorker)
	RegisterWorker("guarded-stall-before-rename", stallBeforeRenameWorker)
	RegisterWorker("guarded-update-once", updateOnceWorker)
}

// startGuardedWorker starts the test binary as a worker in role with the
// given environment additions; its output goes to the returned buffer.
func startGuardedWorker(t testing.TB, role string, env ...string) (*exec.Cmd, *LockedBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), WorkerEnv+"="+role), env...)
	// Under -race a process sleeps a second at exit by default; workers
	// need not.
	cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	out := new(LockedBuffer)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

func envInt(name string) int {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		panic(fmt.Sprintf("worker: %s: %v", name, err))
	}
	return n
}

// record is line j of appender id. Its length varies (so records straddle
// page and buffer boundaries at varying offsets) and its body is one
// letter repeated, so that a torn or interleaved line cannot parse.
func record(id, j int) string {
	return fmt.Sprintf("w%d r%d %s\n", id, j, strings.Repeat(string(rune('a'+j%26)), 20+(id*7+j*13)%300))
}

// parseRecord checks a line made by record and returns its writer and
// number.
func parseRecord(line string) (id, j int, ok bool) {
	var body string
	if n, err := fmt.Sscanf(line, "w%d r%d %s", &id, &j, &body); n != 3 || err != nil {
		return 0, 0, false
	}
	return id, j, line+"\n" == record(id, j)
}

func appendWorker() int {
	path, id, n := os.Getenv("GUARDED_FILE"), envInt("GUARDED_ID"), envInt("GUARDED_N")
	for j := range n {
		if err := Append(context.Background(), path, []byte(record(id, j))); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// counter is the JSON document the increment tests update.
type counter struct {
	N       int      `json:"n"`
	Writers []string `json:"writers,omitempty"`
}

func increment(old []byte) ([]byte, error) {
	var c counter
	if len(old) > 0 {
		if err := json.Unmarshal(old, &c); err != nil {
			return nil, fmt.Errorf("corrupt counter %q: %w", old, err)
		}
	}
	c.N++
	return json.MarshalIndent(c, "", "  ")
}

func incrementWorker() int {
	path, n := os.Getenv("GUARDED_FILE"), envInt("GUARDED_N")
	for range n {
		if err := Update(context.Background(), path, increment); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// flipContents are the two large contents the kill test alternates
// between: a reader must always find exactly one of them.
func flipContents(size int) (a, b []byte) {
	a = bytes.Repeat([]byte("old content line\n"), size/17)
	b = bytes.Repeat([]byte("NEW CONTENT LINE\n"), size/17+1)
	return a, b
}

func flipWorker() int {
	path, size := os.Getenv("GUARDED_FILE"), envInt("GUARDED_SIZE")
	a, b := flipContents(size)
	err := Update(context.Background(), path, func(old []byte) ([]byte, error) {
		fmt.Println("fn called")
		if bytes.Equal(old, a) {
			return b, nil
		}
		return a, nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("published")
	return 0
}

// stallFS blocks forever at the rename, after the temp file is complete,
// so a test can kill the process exactly there.
type stallFS struct{ atomicfile.OS }

func (stallFS) Rename(oldpath, newpath string) error {
	fmt.Println("stalled at rename of", filepath.Base(oldpath))
	select {}
}

func stallBeforeRenameWorker() int {
	path := os.Getenv("GUARDED_FILE")
	err := update(context.Background(), stallFS{}, path, func([]byte) ([]byte, error) {
		return []byte("never published\n"), nil
	}, nil)
	fmt.Fprintln(os.Stderr, "stall returned:", err)
	return 1
}

// updateOnceWorker runs one Update (or Append with GUARDED_OP=append) and
// prints the error, for the permission tests that run as another user. It
// exits 0 when the operation failed with a permission error, 1 when it
// succeeded, 2 on any other error. GUARDED_OPTS may hold "split" and
// "owner" (AllowSplit, AllowOwnerChange).
func updateOnceWorker() int {
	path := os.Getenv("GUARDED_FILE")
	opts := []Option{LockFile(os.Getenv("GUARDED_LOCK"))}
	for _, o := range strings.Fields(os.Getenv("GUARDED_OPTS")) {
		switch o {
		case "split":
			opts = append(opts, AllowSplit())
		case "owner":
			opts = append(opts, AllowOwnerChange())
		}
	}
	var err error
	if os.Getenv("GUARDED_OP") == "append" {
		err = Append(context.Background(), path, []byte("appended\n"), opts...)
	} else {
		err = Update(context.Background(), path, func([]byte) ([]byte, error) { return []byte("replaced\n"), nil }, opts...)
	}
	fmt.Println(err)
	switch {
	case err == nil:
		return 1
	case errorsIsPermission(err):
		return 0
	}
	return 2
}

func errorsIsPermission(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS)
}

// tempFiles lists the temp files of ours beside target.
func tempFiles(t testing.TB, target string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(filepath.Dir(target), "."+filepath.Base(target)+".hold-*.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// runGuardedWorkers starts n workers at once, worker i with the role and
// environment args(i) returns (role first), and waits for them all; a
// worker that fails fails the test, with its output.
func runGuardedWorkers(t *testing.T, n int, args func(i int) []string) {
	t.Helper()
	cmds := make([]*exec.Cmd, n)
	outs := make([]*LockedBuffer, n)
	for i := range n {
		a := args(i)
		cmds[i], outs[i] = startGuardedWorker(t, a[0], a[1:]...)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("worker %d: %v: %s", i, err, outs[i])
		}
	}
}

// waitOutput waits until the worker printed want or d passed.
func waitOutput(t testing.TB, out *LockedBuffer, want string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("worker did not print %q within %v; output: %s", want, d, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// LockedBuffer is a bytes.Buffer a test may read while a worker's output is
// still being copied into it. Exported (in a test file only) so that the
// external test package's workers use it too.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *LockedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *LockedBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
