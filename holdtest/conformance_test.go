package holdtest_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/holdtest"
	"github.com/hold-dev/hold/internal/testenv"
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

func init() {
	if testenv.UnderWine() {
		// wine's wineserver takes part in every file operation of all
		// processes, which makes each acquisition far slower than on
		// Windows: 16 processes still contend, for fewer increments.
		kernel.Increments = 25
		// Removing an open file leaves its name in place until the last
		// handle closes, as on Windows before 10: the holder's path still
		// names its file, so nothing is lost.
		kernel.Lose = nil
		kernel.LoseSkip = "wine: a removed file that is still open keeps its name until its last handle closes, as before Windows 10, so removing the lock file takes nothing away"
	}
}

func TestMain(m *testing.M) {
	if code, ok := holdtest.RunWorker(kernel, fair, broken); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

func TestConformanceKernel(t *testing.T) { holdtest.Run(t, kernel) }

func TestSemaphoreKernel(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("kernel semaphores wait in the fair queue, which is implemented on unix systems only")
	}
	holdtest.RunSemaphore(t, kernel)
}

func TestSemaphoreFair(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("fair mode is implemented on unix systems only")
	}
	holdtest.RunSemaphore(t, fair)
}

func TestConformanceFair(t *testing.T) {
	if runtime.GOOS == "windows" {
		fairRefused(t)
		t.Skip("fair mode is implemented on unix systems only; every entry point refuses it here (checked)")
	}
	holdtest.Run(t, fair)
}

// fairRefused checks that where fair mode is not implemented, every way
// of taking a lock refuses it with ErrUnsupported and runs nothing.
func fairRefused(t *testing.T) {
	ctx := context.Background()
	target := filepath.Join(t.TempDir(), "T")
	ran := func(context.Context) error { t.Error("Do ran fn under Fair"); return nil }
	_, errAcquire := hold.Acquire(ctx, target, hold.Fair())
	_, errTry := hold.TryAcquire(target, hold.Fair())
	errUpdate := hold.Update(ctx, target, func(b []byte) ([]byte, error) { return []byte("x"), nil }, hold.Fair())
	for name, err := range map[string]error{
		"Acquire":    errAcquire,
		"TryAcquire": errTry,
		"Do":         hold.Do(ctx, target, ran, hold.Fair()),
		"Update":     errUpdate,
		"Append":     hold.Append(ctx, target, []byte("x"), hold.Fair()),
	} {
		if !errors.Is(err, hold.ErrUnsupported) {
			t.Errorf("%s with Fair: %v, want ErrUnsupported", name, err)
		}
	}
	if _, err := os.Stat(target); err == nil {
		t.Error("an update or append under a refused Fair wrote the file")
	}
}
