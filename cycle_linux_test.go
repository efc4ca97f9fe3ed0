package hold_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/testenv"
)

// The uncontended cycle, Acquire + Release of a plain target, is what a
// program taking one lock in a loop pays on every turn, so what it costs
// is pinned here in the two measures that do not depend on the machine's
// load: system calls and allocations. A change that adds to either fails
// these tests; if it must, say why in docs/bench.md and raise the figure.

// cycleSyscalls is what an uncontended cycle costs on Linux, as an
// open-lock-close cycle does: openat, flock, statx (what the file is and
// that it kept its name, with the lock held), close.
const cycleSyscalls = 4

// cycleAllocs bounds the allocations of an uncontended cycle: the
// request, its lock path, the lock file, the protocol's handle and the
// Lock.
const cycleAllocs = 5

func TestUncontendedCycleSystemCalls(t *testing.T) {
	target := filepath.Join(t.TempDir(), "t")
	cycle := func() {
		l, err := hold.Acquire(context.Background(), target)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
	}
	// The calls are counted on this goroutine's thread only (the
	// runtime's other threads do their own work meanwhile).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	counter := openSyscallCounter(t)
	defer unix.Close(counter)
	for range 3 {
		cycle() // the lock file exists, this process knows it
	}
	// A batch may catch a call of the runtime's on this thread (the
	// return from a preemption signal, a page of stack): the least of
	// several batches is the cycle's own.
	const batch = 50
	least, reading := uint64(1<<62), uint64(1<<62)
	for range 10 {
		before := readCounter(t, counter)
		for range batch {
			cycle()
		}
		least = min(least, readCounter(t, counter)-before)
		// (The second read of the counter is counted too.)
		before = readCounter(t, counter)
		reading = min(reading, readCounter(t, counter)-before)
	}
	least -= reading
	if per := float64(least) / batch; per > cycleSyscalls {
		t.Errorf("an uncontended Acquire + Release makes %.2f system calls, want %d (openat, flock, statx, close): see docs/bench.md", per, cycleSyscalls)
	}
}

func TestUncontendedCycleAllocations(t *testing.T) {
	target := filepath.Join(t.TempDir(), "t")
	ctx := context.Background()
	allocs := testing.AllocsPerRun(200, func() {
		l, err := hold.Acquire(ctx, target)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > cycleAllocs {
		t.Errorf("an uncontended Acquire + Release makes %.1f allocations, want at most %d: see docs/bench.md", allocs, cycleAllocs)
	}
}

// contendedSyscalls is what a contended acquisition costs its waiter on
// Linux, and then its release: openat, flock (refused: busy), statx (what
// the file is), flock (the wait), statx (that the file kept its name, now
// that it is held), close. A wait passes through the Go scheduler at most
// once per 5 ms per process (internal/resched, flock's waitLock), which
// may wake another thread of the runtime (futex): the least of cycles
// made back to back is one that did not.
const contendedSyscalls = 6

// TestContendedHandOffSystemCalls counts the system calls of a waiter's
// thread from its Acquire to its Release, the lock held at first by
// another descriptor (another open file description, which the kernel
// treats as it treats another process) and let go once the kernel lists
// the waiter as blocked.
func TestContendedHandOffSystemCalls(t *testing.T) {
	target := filepath.Join(t.TempDir(), "t")
	path := target + ".lock"
	cycle := func() {
		l, err := hold.Acquire(context.Background(), target)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		cycle() // the lock file exists, this process knows it
	}
	holder, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(holder)
	if _, _, ok := kernelLocks(path); !ok {
		t.Fatal("/proc/locks does not list the lock file's locks")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	counter := openSyscallCounter(t)
	defer unix.Close(counter)
	least, reading := uint64(1<<62), uint64(1<<62)
	for range 10 {
		if err := unix.Flock(holder, unix.LOCK_EX); err != nil {
			t.Fatal(err)
		}
		// Let go once this process's wait is blocked in the kernel; from
		// another goroutine, on another thread.
		let := make(chan error, 1)
		go func() {
			deadline := time.Now().Add(hangBound)
			for {
				_, waiters, _ := kernelLocks(path)
				if slices.Contains(waiters, os.Getpid()) {
					let <- unix.Flock(holder, unix.LOCK_UN)
					return
				}
				if time.Now().After(deadline) {
					unix.Flock(holder, unix.LOCK_UN)
					let <- fmt.Errorf("the wait was not seen blocked in %v", hangBound)
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
		before := readCounter(t, counter)
		cycle()
		n := readCounter(t, counter) - before
		if err := <-let; err != nil {
			t.Fatal(err)
		}
		least = min(least, n)
		before = readCounter(t, counter)
		reading = min(reading, readCounter(t, counter)-before)
	}
	least -= reading
	if least > contendedSyscalls {
		t.Errorf("a contended Acquire + Release makes %d system calls on the waiter's thread, want %d (openat, flock, statx, flock, statx, close): see docs/bench.md", least, contendedSyscalls)
	}
}

// openSyscallCounter counts the system calls this thread enters, with the
// kernel's raw_syscalls:sys_enter tracepoint (perf_event_open(2)).
func openSyscallCounter(t *testing.T) int {
	t.Helper()
	const why = "counting the system calls of a lock cycle"
	var id uint64
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if id = sysEnterID(dir); id != 0 {
			break
		}
	}
	if id == 0 {
		// A fresh machine may not mount tracefs (/sys/kernel/tracing is
		// then an empty directory). Mounted in a mount namespace of this
		// test's own, it shows the same kernel-wide tracepoint ids, and
		// the machine's mounts stay as they were.
		var err error
		if id, err = sysEnterIDOwnMount(t.TempDir()); err != nil {
			testenv.MissingTool(t, "the tracepoint raw_syscalls:sys_enter (tracefs)",
				why+": tracefs is not mounted, and this test could not mount it in a mount namespace of its own ("+err.Error()+
					"); mount it (as root: mount -t tracefs nodev /sys/kernel/tracing), or run the test as root")
		}
	}
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_TRACEPOINT,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Config: id,
	}
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		testenv.MissingTool(t, "perf_event_open(2) of a tracepoint ("+err.Error()+")", why)
	}
	return fd
}

// sysEnterID is the id of the tracepoint raw_syscalls:sys_enter in the
// tracefs mounted at dir, or 0.
func sysEnterID(dir string) uint64 {
	b, err := os.ReadFile(filepath.Join(dir, "events/raw_syscalls/sys_enter/id"))
	if err != nil {
		return 0
	}
	id, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return id
}

// sysEnterIDOwnMount mounts tracefs on dir in a mount namespace of its
// own and reads sys_enter's id there. The namespace belongs to one thread,
// locked to a goroutine that ends without unlocking it, so that the
// runtime ends the thread, and with it the namespace and the mount; no
// other thread, and nothing outside this process, ever sees the mount
// (the namespace's mounts are made private first, so that nothing
// propagates back). It takes CAP_SYS_ADMIN.
func sysEnterIDOwnMount(dir string) (uint64, error) {
	type result struct {
		id  uint64
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see above
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- result{err: fmt.Errorf("unshare(CLONE_NEWNS): %w", err)}
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- result{err: fmt.Errorf("making the namespace's mounts private: %w", err)}
			return
		}
		if err := unix.Mount("nodev", dir, "tracefs", 0, ""); err != nil {
			done <- result{err: fmt.Errorf("mount -t tracefs: %w", err)}
			return
		}
		id := sysEnterID(dir)
		unix.Unmount(dir, unix.MNT_DETACH)
		if id == 0 {
			done <- result{err: fmt.Errorf("tracefs mounted has no events/raw_syscalls/sys_enter/id")}
			return
		}
		done <- result{id: id}
	}()
	r := <-done
	return r.id, r.err
}

func readCounter(t *testing.T, fd int) uint64 {
	t.Helper()
	var b [8]byte
	if n, err := unix.Read(fd, b[:]); err != nil || n != 8 {
		t.Fatalf("reading the system call counter: %d bytes, %v", n, err)
	}
	return *(*uint64)(unsafe.Pointer(&b[0]))
}
