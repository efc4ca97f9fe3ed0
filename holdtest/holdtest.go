// Package holdtest checks that a lock protocol keeps the promises every
// hold protocol makes, in the manner of testing/fstest.TestFS: a protocol's
// tests describe it in a Subject and call Run, which runs the checks as
// subtests. Checks that need other processes (exclusion, a crashed holder)
// re-run the test binary as workers, so the test binary's TestMain must
// give them their turn first:
//
//	var kernel = holdtest.Subject{Name: "kernel"}
//
//	func TestMain(m *testing.M) {
//		if code, ok := holdtest.RunWorker(kernel); ok {
//			os.Exit(code)
//		}
//		os.Exit(m.Run())
//	}
//
//	func TestConformanceKernel(t *testing.T) { holdtest.Run(t, kernel) }
//
// What every protocol must do:
//   - exclusion across processes: N workers incrementing one counter under
//     the lock lose no increment, and each acquisition is logged once;
//   - TryAcquire of a held lock fails at once with ErrBusy, naming the
//     holder in the error and its message, from another process and from
//     the holder's own (two acquisitions in one process exclude each other);
//   - a wait ends with its context: ErrTimeout (and context.DeadlineExceeded)
//     at the deadline, context.Canceled on cancel, never both, and an
//     abandoned wait never leaves the lock held;
//   - Release is idempotent, and Check after it reports ErrReleased;
//   - fencing tokens strictly increase from holder to holder, across
//     processes (or, for a protocol without tokens, TokenError says why);
//   - shared holds exclude writers and admit readers, or are refused with
//     ErrUnsupported;
//   - Inspect names the holder, its protocol and its token while the lock
//     is held, and free after;
//   - a lock taken away from its holder is reported by Check at once and
//     by Lost, and every Release after says so too; the lock is then free
//     for a newcomer, whose lock the old holder's Release leaves alone;
//   - a holder killed with SIGKILL frees the lock within the protocol's
//     promise, and the next holder's token is above the killed one's;
//   - foreign content at a lock path is never written or deleted;
//   - invalid lock names are refused with ErrInvalidName.
//
// A protocol that keeps semaphores (lock.Semaphore, hold.Slots) also calls
// RunSemaphore with its subject, which checks with real processes that
// never more than N hold at once while holders are killed, that a free
// slot is taken at once, ErrSlotCount, busy naming every holder, rising
// tokens, a crashed holder's slot, and a plain lock kept apart (see
// semaphore.go):
//
//	func TestSemaphoreKernel(t *testing.T) { holdtest.RunSemaphore(t, kernel) }
package holdtest

import (
	"os"
	"testing"
	"time"

	"github.com/hold-dev/hold"
)

// A Subject describes the protocol under test. Its functions run in the
// test process and in every worker process: they may read the environment
// (Env is added to the workers'), but nothing else of the test process.
type Subject struct {
	// Name names the subject in subtests and worker roles; every subject
	// passed to RunWorker must have its own.
	Name string

	// Options returns the options that select the protocol (for example
	// hold.WithProtocol(p), or hold.Fair()), and a function that frees
	// what they hold (a connection), or nil. Nil Options means hold's
	// default, the kernel lock. The checks pass them to Inspect too,
	// which refuses options about taking a lock (see hold.Option).
	Options func() (opts []hold.Option, closeFn func(), err error)

	// Env is added to each worker's environment: where a server listens.
	Env []string

	// Target returns a new target for one check. Nil means a file name in
	// a new temporary directory, for protocols that lock paths.
	Target func(t *testing.T) string

	// Shared says that the protocol supports shared holds. Otherwise a
	// shared acquisition must fail with ErrUnsupported.
	Shared bool

	// NoTokens, when not empty, says why the protocol has no fencing
	// tokens; TokenError must then match ErrNoToken. Empty means tokens
	// must strictly increase across holders.
	NoTokens string

	// Workers and Increments set how hard the exclusion check presses on
	// the lock: Workers processes each increment the counter Increments
	// times. Zero means 4 and 25; a protocol raises them where contention
	// is what breaks it (a server's queue, a kernel's wake-ups).
	Workers, Increments int

	// CrashFree bounds how long the lock of a holder killed with SIGKILL
	// stays held: 0 for at once (a kernel lock, a database session).
	CrashFree time.Duration

	// Lose takes the lock away from l as an outsider would (removing its
	// lock file, deleting its key, ending its session), for the check that
	// Check and Lost report it. Nil skips that check, with LoseSkip as the
	// reason.
	Lose     func(t *testing.T, l *hold.Lock)
	LoseSkip string
	// StressSkip, when set, skips RunSemaphore's stress check (AtMostN),
	// saying why: a platform where the shared log of stays that its killed
	// workers append to cannot be trusted.
	StressSkip string

	// LockPath, for protocols whose locks are files or directories at a
	// path derived from the target, returns that path, for the check that
	// foreign content there is left alone. Nil skips that check.
	LockPath func(target string) string
}

// options returns the subject's options and their closer (never nil).
func (s Subject) options() ([]hold.Option, func(), error) {
	if s.Options == nil {
		return nil, func() {}, nil
	}
	opts, closeFn, err := s.Options()
	if closeFn == nil {
		closeFn = func() {}
	}
	return opts, closeFn, err
}

// pressure returns the exclusion check's worker and increment counts.
func (s Subject) pressure() (workers, each int) {
	workers, each = s.Workers, s.Increments
	if workers <= 0 {
		workers = 4
	}
	if each <= 0 {
		each = 25
	}
	return workers, each
}

// target returns a new target for one check.
func (s Subject) target(t *testing.T) string {
	if s.Target != nil {
		return s.Target(t)
	}
	dir := t.TempDir()
	return dir + string(os.PathSeparator) + "resource"
}
