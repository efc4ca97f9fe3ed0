package holdtest_test

import (
	"os"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/holdtest"
)

// The local protocols; etcd's and PostgreSQL's run from their packages.

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

// portableStale is the portable subject's StaleAfter: a killed holder's
// lock is taken over once its heartbeat is this old.
const portableStale = 2 * time.Second

var portable = holdtest.Subject{
	Name: "portable",
	Options: func() ([]hold.Option, func(), error) {
		p := hold.Portable(hold.StaleAfter(portableStale), hold.Heartbeat(portableStale/4))
		return []hold.Option{hold.WithProtocol(p)}, nil, nil
	},
	NoTokens:  "the lock directory is deleted on release, so no counter survives it",
	CrashFree: 2 * portableStale,
	Lose: func(t *testing.T, l *hold.Lock) {
		if err := os.RemoveAll(l.Path()); err != nil {
			t.Fatal(err)
		}
	},
	LockPath: lockFileOf,
}

func TestMain(m *testing.M) {
	if code, ok := holdtest.RunWorker(kernel, fair, portable, broken); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func TestConformanceKernel(t *testing.T)   { holdtest.Run(t, kernel) }
func TestConformanceFair(t *testing.T)     { holdtest.Run(t, fair) }
func TestConformancePortable(t *testing.T) { holdtest.Run(t, portable) }
