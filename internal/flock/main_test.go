package flock

import (
	"fmt"
	"os"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
)

// Multi-process tests run this test binary again as a worker: TestMain
// finds roleEnv and plays that role instead of running the tests.
const (
	roleEnv = "FLOCK_TEST_ROLE"
	pathEnv = "FLOCK_TEST_PATH"
)

// roles are the worker roles of tests built only on some systems, which
// register them from init.
var roles = map[string]func(path string) int{}

func TestMain(m *testing.M) {
	switch role := os.Getenv(roleEnv); role {
	case "":
		os.Exit(testenv.Run(m))
	case "watcher":
		os.Exit(watcherRole(os.Getenv(pathEnv)))
	case "holder":
		os.Exit(holderRole(os.Getenv(pathEnv)))

	default:
		if run, ok := roles[role]; ok {
			os.Exit(run(os.Getenv(pathEnv)))
		}
		fmt.Fprintln(os.Stderr, "unknown role", role)
		os.Exit(2)
	}
}
