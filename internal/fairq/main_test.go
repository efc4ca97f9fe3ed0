//go:build unix

package fairq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/lock"
)

// Multi-process tests re-run this test binary as a worker: TestMain sees
// roleEnv and runs the role instead of the tests.
const (
	roleEnv    = "FAIRQ_TEST_ROLE"
	lockEnv    = "FAIRQ_TEST_LOCK"
	idEnv      = "FAIRQ_TEST_ID"
	outEnv     = "FAIRQ_TEST_OUT"
	fairEnv    = "FAIRQ_TEST_FAIR"
	loopsEnv   = "FAIRQ_TEST_LOOPS"
	markerEnv  = "FAIRQ_TEST_MARKER"
	counterEnv = "FAIRQ_TEST_COUNTER"
	designEnv  = "FAIRQ_TEST_DESIGN"
)

// The queue designs under test: "tickets" (a directory of ticket files,
// every unix) and, on Linux, "ofd" (byte-range locks in one queue file).
const (
	ticketsDesign = "tickets"
	ofdDesign     = "ofd"
)

// newProtocol returns the fair protocol of one design over kernel locks.
func newProtocol(design string) Protocol {
	p := New(flock.Protocol{})
	p.ticketFiles = design == ticketsDesign
	return p
}

// queued lists the tickets in the queue of the lock at path: files in the
// ticket directory, or slots locked in the queue file.
func queued(t *testing.T, design, path string) []uint64 {
	t.Helper()
	if design == ticketsDesign {
		return tickets(t, path)
	}
	return lockedSlots(t, path)
}

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		os.Exit(testenv.Run(m))
	case "waiter":
		os.Exit(waiterRole())
	case "loop":
		os.Exit(loopRole())
	case "rw":
		os.Exit(rwRole())
	case "slotchurn":
		os.Exit(slotChurnRole())
	case "slotlook":
		os.Exit(slotLookRole())
	case "front":
		os.Exit(frontRole())
	default:
		fmt.Fprintln(os.Stderr, "unknown role", os.Getenv(roleEnv))
		os.Exit(2)
	}
}

func request(path string) *lock.Request {
	return &lock.Request{Path: path, Owner: proc.Self()}
}

// waiterRole takes the lock in fair mode loops times (default once) and
// appends its id to the output file each time while holding it. Taking it
// again at once is what a plain kernel lock rewards with barging: a fair
// waiter must go to the back of the queue instead.
func waiterRole() int {
	path, id, out := os.Getenv(lockEnv), os.Getenv(idEnv), os.Getenv(outEnv)
	loops := 1
	if s := os.Getenv(loopsEnv); s != "" {
		loops, _ = strconv.Atoi(s)
	}
	p := newProtocol(os.Getenv(designEnv))
	for i := 0; i < loops; i++ {
		req := request(path)
		tc := &ticketCatcher{}
		req.Logger = slog.New(tc)
		h, err := p.Acquire(context.Background(), req)
		if err != nil {
			fmt.Fprintln(os.Stderr, "acquire:", err)
			return 1
		}
		f, err := os.OpenFile(out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err == nil {
			_, err = fmt.Fprintf(f, "%s %d\n", id, tc.ticket)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "record:", err)
			return 1
		}
		if err := h.Release(); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			return 1
		}
	}
	return 0
}

// ticketCatcher is a slog handler that keeps the ticket number from the
// "joined fair queue" debug event.
type ticketCatcher struct{ ticket uint64 }

func (c *ticketCatcher) Enabled(context.Context, slog.Level) bool { return true }
func (c *ticketCatcher) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *ticketCatcher) WithGroup(string) slog.Handler            { return c }
func (c *ticketCatcher) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "ticket" {
			c.ticket = a.Value.Uint64()
		}
		return true
	})
	return nil
}

// loopRole takes the lock (fair or plain) again and again; inside, it
// creates a marker file with O_EXCL, which fails if anyone else is inside
// too, and increments a counter by read-modify-write, which loses an update
// if anyone else is inside too.
func loopRole() int {
	path, marker, counter := os.Getenv(lockEnv), os.Getenv(markerEnv), os.Getenv(counterEnv)
	loops, _ := strconv.Atoi(os.Getenv(loopsEnv))
	var p lock.Protocol = flock.Protocol{}
	if os.Getenv(fairEnv) == "1" {
		p = newProtocol(os.Getenv(designEnv))
	}
	for i := 0; i < loops; i++ {
		h, err := p.Acquire(context.Background(), request(path))
		if err != nil {
			fmt.Fprintln(os.Stderr, "acquire:", err)
			return 1
		}
		m, err := os.OpenFile(marker, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, "two holders at once:", err)
			return 3
		}
		m.Close()
		b, err := os.ReadFile(counter)
		if err != nil {
			fmt.Fprintln(os.Stderr, "read counter:", err)
			return 1
		}
		n, _ := strconv.Atoi(string(b))
		if err := os.WriteFile(counter, []byte(strconv.Itoa(n+1)), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "write counter:", err)
			return 1
		}
		if err := os.Remove(marker); err != nil {
			fmt.Fprintln(os.Stderr, "remove marker:", err)
			return 1
		}
		if err := h.Release(); err != nil {
			fmt.Fprintln(os.Stderr, "release:", err)
			return 1
		}
	}
	return 0
}

// worker starts this test binary in a role.
func worker(t *testing.T, role string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := testenv.Command(append([]string{roleEnv + "=" + role}, env...)...)
	cmd.Stderr = &prefixWriter{t: t, prefix: role + ": "}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd
}

type prefixWriter struct {
	t      *testing.T
	prefix string
}

func (w *prefixWriter) Write(b []byte) (int, error) {
	w.t.Log(w.prefix + string(b))
	return len(b), nil
}

// tickets lists the ticket files in the queue of the lock at path.
func tickets(t *testing.T, path string) []uint64 {
	t.Helper()
	entries, err := os.ReadDir(path + QueueSuffix)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []uint64
	for _, e := range entries {
		if n, ok := parseTicket(e.Name()); ok {
			out = append(out, n)
		}
	}
	return out
}

// waitFor polls cond until it holds; the bound only catches hangs.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what, cond)
}

// holdMain takes the main lock as a plain waiter, so fair waiters queue.
func holdMain(t *testing.T, path string) lock.Handle {
	t.Helper()
	h, err := flock.Protocol{}.TryAcquire(request(path))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func lockPath(t *testing.T) string { return filepath.Join(t.TempDir(), "data.lock") }

// ticketCounterFree reports whether nobody holds the tickets design's
// counter lock. The probe takes the lock for an instant when it is free.
func ticketCounterFree(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(path+QueueSuffix, counterName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == syscall.EWOULDBLOCK {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// holdTicketCounter takes the ticket directory's counter lock.
func holdTicketCounter(t *testing.T, path string) func() {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(path+QueueSuffix, counterName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	return func() { f.Close() }
}
