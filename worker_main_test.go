package hold

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
)

// This file is the one TestMain of the hold package's tests (internal and
// external test files share a binary, and a binary has one TestMain).
// Multi-process tests re-run the test binary as a worker: they set
// WorkerEnv to a role name and TestMain runs that role instead of the
// tests. A test file adds its roles from an init function:
//
//	func init() { RegisterWorker("append", appendWorker) }
//
// A role reads its parameters from the environment and returns the exit
// status. RegisterWorker is exported so that package hold_test files can
// register roles too.

// WorkerEnv names the environment variable that selects a worker role.
const WorkerEnv = "HOLD_TEST_WORKER"

var (
	workersMu sync.Mutex
	workers   = map[string]func() int{}
)

// RegisterWorker adds a worker role. Call it from init.
func RegisterWorker(role string, run func() int) {
	workersMu.Lock()
	defer workersMu.Unlock()
	if _, dup := workers[role]; dup {
		panic("worker role registered twice: " + role)
	}
	workers[role] = run
}

func TestMain(m *testing.M) {
	if role := os.Getenv(WorkerEnv); role != "" {
		workersMu.Lock()
		run, ok := workers[role]
		workersMu.Unlock()
		if !ok {
			fmt.Fprintf(os.Stderr, "unknown worker role %q\n", role)
			os.Exit(70)
		}
		os.Exit(run())
	}
	os.Exit(testenv.Run(m))
}
