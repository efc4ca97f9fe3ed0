//go:build unix

package hold_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/hold-dev/hold"
)

// The examples whose output holds on unix systems only: file modes, hard
// links, removing a lock file that is held open, and what the kernel says
// of a shared hold differ on Windows.

// Update refuses what it cannot do safely, before it writes anything, with
// an error a program can match: the options say which refusals it accepts
// instead.
func ExampleUpdate_refusals() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	conf := filepath.Join(dir, "app.conf")
	clear := func([]byte) ([]byte, error) { return nil, nil }

	err := hold.Update(context.Background(), conf, clear, hold.MustExist())
	fmt.Println("missing:", errors.Is(err, fs.ErrNotExist))

	os.WriteFile(conf, []byte("port=80\n"), 0o644)
	err = hold.Update(context.Background(), conf, clear)
	fmt.Println("emptied:", errors.Is(err, hold.ErrEmpty))
	err = hold.Update(context.Background(), conf, clear, hold.AllowEmpty())
	fmt.Println("emptied with AllowEmpty:", err)

	os.Link(conf, filepath.Join(dir, "backup.conf"))
	set := func([]byte) ([]byte, error) { return []byte("port=8080\n"), nil }
	err = hold.Update(context.Background(), conf, set)
	fmt.Println("hard-linked:", errors.Is(err, hold.ErrHardLinked))
	err = hold.Update(context.Background(), conf, set, hold.AllowSplit())
	fmt.Println("hard-linked with AllowSplit:", err)

	err = hold.Update(context.Background(), conf, set, hold.LockFile(conf))
	fmt.Println("locking the file itself:", errors.Is(err, hold.ErrLockIsTarget))
	// Output:
	// missing: true
	// emptied: true
	// emptied with AllowEmpty: <nil>
	// hard-linked: true
	// hard-linked with AllowSplit: <nil>
	// locking the file itself: true
}

// Inspect's Status tells a lock's state and, when it is held, who holds it
// and whether that holder still lives.
func ExampleStatus() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "data.db")

	describe := func(st *hold.Status) string {
		switch st.State {
		case hold.Free:
			return "free"
		case hold.Stale:
			return "stale: its holder is gone, hold break may remove it"
		}
		var h *hold.Holder = st.Holder
		var alive hold.Liveness = hold.LivenessUnknown
		if h != nil {
			alive = h.Alive
		}
		switch alive {
		case hold.Alive:
			return st.State.String() + ", holder alive"
		case hold.Dead:
			return st.State.String() + ", holder dead"
		}
		return st.State.String() + " (a shared hold writes no record; a holder on another host cannot be asked)"
	}
	for _, opts := range [][]hold.Option{nil, {hold.Shared()}} {
		l, err := hold.Acquire(context.Background(), target, opts...)
		if err != nil {
			panic(err)
		}
		st, _ := hold.Inspect(target)
		fmt.Println(describe(st), st.State == hold.HeldShared)
		l.Release()
	}
	st, _ := hold.Inspect(target)
	fmt.Println(describe(st))
	// Output:
	// held exclusive, holder alive false
	// held shared (a shared hold writes no record; a holder on another host cannot be asked) true
	// free
}

// AfterLost runs a function once the lock is found lost, here because its
// lock file was removed, which Check finds at once.
func ExampleLock_AfterLost() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "data.db")

	l, err := hold.Acquire(context.Background(), target)
	if err != nil {
		panic(err)
	}
	lost := make(chan struct{})
	stop := l.AfterLost(func() { close(lost) })
	defer stop()

	os.Remove(l.Path()) // what a careless cleanup script does
	fmt.Println(errors.Is(l.Check(), hold.ErrLost))
	<-lost
	fmt.Println("told")
	// Output:
	// true
	// told
}

// A lock file where no directory exists yet, private to its user, with a
// field in its owner record and the command line left out of it.
func ExampleMakeDirs() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	lockFile := filepath.Join(dir, "run", "jobs", "nightly.lock")

	l, err := hold.Acquire(context.Background(), "", hold.LockFile(lockFile), hold.MakeDirs(),
		hold.LockFileMode(0o600), hold.Field("job", "nightly"), hold.OmitCommand())
	if err != nil {
		panic(err)
	}
	defer l.Release()
	fi, _ := os.Stat(lockFile)
	st, _ := hold.Inspect("", hold.LockFile(lockFile))
	fmt.Println(fi.Mode().Perm(), st.Holder.Owner.Fields["job"], len(st.Holder.Owner.Command))
	// Output: -rw------- nightly 0
}

// A child process given a lock's files keeps the lock, all of it, even if
// this process dies first, as `hold run` does for its command. A
// semaphore's slot is kept by two files: the slot's own, which also keeps
// another N out, and the shared hold of the lock file, which keeps a plain
// lock of the path out.
func ExampleLock_Files() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	l, err := hold.TryAcquire(filepath.Join(dir, "build"), hold.Slots(4))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release()
	cmd := exec.Command("true")
	cmd.ExtraFiles = l.Files() // the child's fds 3 and 4
	fmt.Println("slot:", l.Slot(), "files:", len(cmd.ExtraFiles), "ran:", cmd.Run() == nil)
	// Output: slot: 0 files: 2 ran: true
}
