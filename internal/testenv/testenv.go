// Package testenv is what the test mains of hold's packages share: every
// test binary keeps named locks in a directory of its own, and a test that
// cannot run because a tool is missing says so where it is seen.
//
// Named locks live in one directory per user (see hold.NamedDir). Tests
// that take them, or run hold, the agent or the Node package that do,
// would otherwise leave lock files in the user's real directory, where
// `hold ls` shows them, and meet the names of other test runs. Run points
// HOLD_TEST_NAMED_DIR (the tests' own override, see internal/nameddir)
// and XDG_RUNTIME_DIR (where earlier versions kept them) at a fresh
// directory for the whole binary and every process it starts, and
// removes it after.
//
// `go test ./...` prints only "ok" for a package whose tests passed, so a
// test skipped because flock(1) or bindfs is not installed goes unseen.
// MissingTool records such a skip; Run prints one summary line per
// package on stderr, and on the terminal when there is one (the go
// command shows a passing package's stderr only with -v). With
// HOLD_TEST_NOSKIP=1, which .ci/run sets, a missing tool fails the test
// instead, so that CI runs every test.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hold-dev/hold/internal/nameddir"
)

// NoSkipEnv names the environment variable that turns a skip for a
// missing tool into a failure.
const NoSkipEnv = "HOLD_TEST_NOSKIP"

var (
	mu      sync.Mutex
	missing []string // "TestName (tool)"
)

// Run runs the tests of m with named locks in a fresh directory, prints
// the summary of tests skipped for a missing tool, and returns the exit
// status for os.Exit.
func Run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "hold-test-run-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// MkdirTemp makes it 0700, as a named-lock directory must be.
	os.Setenv(nameddir.TestEnv, dir)
	os.Setenv("XDG_RUNTIME_DIR", dir)
	code := m.Run()
	if line := Summary(); line != "" {
		fmt.Fprintln(os.Stderr, line)
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			fmt.Fprintln(tty, line)
			tty.Close()
		}
	}
	return code
}

// Summary returns the line Run prints about the tests skipped for a
// missing tool so far, or "" when there were none.
func Summary() string {
	mu.Lock()
	defer mu.Unlock()
	if len(missing) == 0 {
		return ""
	}
	pkg := strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
	return fmt.Sprintf("%s: SKIPPED for missing tools: %s (set %s=1 to make this a failure)",
		pkg, strings.Join(missing, ", "), NoSkipEnv)
}

// MissingTool ends t, which needs tool and cannot run without it (why
// says what is missing and what installs it): a skip that Run's summary
// lists, or a failure when HOLD_TEST_NOSKIP=1.
func MissingTool(t testing.TB, tool, why string) {
	t.Helper()
	if os.Getenv(NoSkipEnv) == "1" {
		t.Fatalf("%s: %s (%s=1: CI runs every test)", tool, why, NoSkipEnv)
	}
	mu.Lock()
	missing = append(missing, t.Name()+" ("+tool+")")
	mu.Unlock()
	t.Skipf("%s: %s", tool, why)
}

// LookPath returns the path of the executable tool, or ends t with
// MissingTool.
func LookPath(t testing.TB, tool, why string) string {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err != nil {
		MissingTool(t, tool, why)
	}
	return path
}
