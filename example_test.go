package hold_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/portable"
)

// A read-modify-write of a shared file, safe against every other process
// that locks the same target.
func ExampleDo() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	tracker := filepath.Join(dir, "tracker.md")

	err := hold.Do(context.Background(), tracker, func(ctx context.Context) error {
		b, _ := os.ReadFile(tracker)
		return os.WriteFile(tracker, append(b, "- one more row\n"...), 0o644)
	})
	fmt.Println(err)
	// Output: <nil>
}

// TryAcquire never waits; a busy lock's error says who holds it.
func ExampleTryAcquire() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "data.db")

	first, err := hold.TryAcquire(target)
	if err != nil {
		panic(err)
	}
	defer first.Release()

	_, err = hold.TryAcquire(target)
	var he *hold.Error
	if errors.Is(err, hold.ErrBusy) && errors.As(err, &he) {
		fmt.Println("busy; holder is this process:", he.Holder.Owner.PID == os.Getpid())
	}
	// Output: busy; holder is this process: true
}

// A wait bounded by a deadline ends with ErrTimeout, which also matches
// context.DeadlineExceeded.
func ExampleAcquire_timeout() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "data.db")

	holder, _ := hold.Acquire(context.Background(), target)
	defer holder.Release()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_, err := hold.Acquire(ctx, target)
	fmt.Println(errors.Is(err, hold.ErrTimeout), errors.Is(err, context.DeadlineExceeded))
	// Output: true true
}

// Fencing tokens grow with every exclusive acquisition, also across
// processes and restarts: pass them along with every write, and have the
// storage refuse a token smaller than one it has seen.
func ExampleLock_Token() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "data.db")

	var tokens []uint64
	for range 3 {
		l, _ := hold.Acquire(context.Background(), target)
		tokens = append(tokens, l.Token())
		l.Release()
	}
	fmt.Println(tokens)
	// Output: [1 2 3]
}

// Before trusting a kernel lock to keep out processes on other machines,
// ask whether the filesystem lets them see it. MachineLocal reports what
// hold's command warns about; RefuseMachineLocal makes it an error instead.
func ExampleLock_MachineLocal() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	l, err := hold.Acquire(context.Background(), filepath.Join(dir, "cache.db"))
	if err != nil {
		panic(err)
	}
	defer l.Release()
	if err := l.MachineLocal(); errors.Is(err, hold.ErrMachineLocal) {
		// An NFS mount with local locks, a FUSE filesystem, ...: other
		// machines sharing dir would not see this lock.
		fmt.Println("use portable.New() here:", err)
		return
	}
	fmt.Println("other machines see this lock, or none share the directory")
	// Output: other machines see this lock, or none share the directory
}

// On a filesystem where other machines may not see kernel locks, take the
// portable protocol's lock instead of risking two holders at once.
func ExampleRefuseMachineLocal() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "cache.db")

	l, err := hold.Acquire(context.Background(), target, hold.RefuseMachineLocal())
	if errors.Is(err, hold.ErrMachineLocal) {
		l, err = hold.Acquire(context.Background(), target, hold.WithProtocol(portable.New()))
	}
	if err != nil {
		panic(err)
	}
	defer l.Release()
	fmt.Println(l.Protocol())
	// Output: flock
}
