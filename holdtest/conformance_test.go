package holdtest_test

import (
	"os"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/holdtest"
)

// The kernel lock and the fair queue, which live in the hold package; the
// portable protocol's, etcd's and PostgreSQL's run from their packages.

// removeLockFile takes a kernel lock away the way rm or a temp cleaner
// does: newcomers lock a new file of the same name.
func removeLockFile(t *testing.T, l *hold.Lock) {
	if err := os.Remove(l.Path()); err != nil {
		t.Fatal(err)
	}
}

func lockFileOf(target string) string { return target + ".lock" }

var kernel = holdtest.Subject{
	Name: "kernel",
	// The kernel lock is hold's default: it is pressed hardest, 16
	// processes of 200 increments, its tokens kept in the lock file
	// across all of them.
	Workers:    16,
	Increments: 200,
	Shared:     true,
	CrashFree:  0,
	Lose:       removeLockFile,
	LockPath:   lockFileOf,
}

var fair = holdtest.Subject{
	Name: "fair",
	Options: func() ([]hold.Option, func(), error) {
		return []hold.Option{hold.Fair()}, nil, nil
	},
	Shared:   true,
	Lose:     removeLockFile,
	LockPath: lockFileOf,
}

func TestMain(m *testing.M) {
	if code, ok := holdtest.RunWorker(kernel, fair, broken); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func TestConformanceKernel(t *testing.T) { holdtest.Run(t, kernel) }
func TestConformanceFair(t *testing.T)   { holdtest.Run(t, fair) }
