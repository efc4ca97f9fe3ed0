package hold_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// A guarded read-modify-write: fn gets the old content under the lock and
// returns the new, which replaces the file atomically. Readers see the old
// content or the new, never a mix, and no writer's change is lost.
func ExampleUpdate() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	hooks := filepath.Join(dir, "hooks.json")

	addHook := func(old []byte) ([]byte, error) {
		cfg := struct {
			Hooks []string `json:"hooks"`
		}{}
		if len(old) > 0 {
			if err := json.Unmarshal(old, &cfg); err != nil {
				return nil, err // nothing is written
			}
		}
		cfg.Hooks = append(cfg.Hooks, "lint")
		return json.Marshal(cfg)
	}
	for range 2 {
		if err := hold.Update(context.Background(), hooks, addHook); err != nil {
			panic(err)
		}
	}
	b, _ := os.ReadFile(hooks)
	fmt.Println(string(b))
	// Output: {"hooks":["lint","lint"]}
}

// Append adds one record in one write and an fsync, under the file's lock,
// so concurrent appenders never interleave.
func ExampleAppend() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	log := filepath.Join(dir, "events.log")

	for _, line := range []string{"deployed v41\n", "deployed v42\n"} {
		if err := hold.Append(context.Background(), log, []byte(line)); err != nil {
			panic(err)
		}
	}
	b, _ := os.ReadFile(log)
	fmt.Print(string(b))
	// Output:
	// deployed v41
	// deployed v42
}

// A named lock guards something other than one file, such as a deploy: the
// same name is the same lock for this user from cron, a shell or a service.
func ExampleNamed() {
	deploy, err := hold.TryAcquire("", hold.Named("example-deploy"))
	if err != nil {
		panic(err)
	}
	defer deploy.Release()

	_, err = hold.TryAcquire("", hold.Named("example-deploy"))
	if errors.Is(err, hold.ErrBusy) {
		fmt.Println("someone else is deploying")
	}
	// Output: someone else is deploying
}

// Inspect reports a lock's state without taking it, as `hold status` does.
func ExampleInspect() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "data.db")

	l, err := hold.Acquire(context.Background(), target)
	if err != nil {
		panic(err)
	}
	st, err := hold.Inspect(target)
	if err != nil {
		panic(err)
	}
	fmt.Println(st.State, st.Holder.Owner.PID == os.Getpid())
	l.Release()

	st, _ = hold.Inspect(target)
	fmt.Println(st.State)
	// Output:
	// held exclusive true
	// free
}

// FailIfHeldHere turns a wait for a lock this process holds, which nothing
// could end while the caller waits, into an immediate ErrDeadlock.
func ExampleFailIfHeldHere() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "data.db")

	l, err := hold.Acquire(context.Background(), target)
	if err != nil {
		panic(err)
	}
	defer l.Release()

	_, err = hold.Acquire(context.Background(), target, hold.FailIfHeldHere())
	fmt.Println(errors.Is(err, hold.ErrDeadlock))
	// Output: true
}

// The portable protocol, for filesystems whose kernel locks other machines
// do not see, is chosen per call; every process sharing the lock must use
// it.
func ExampleWithProtocol() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	l, err := hold.Acquire(context.Background(), filepath.Join(dir, "cache.db"), hold.WithProtocol(portable.New()))
	if err != nil {
		panic(err)
	}
	defer l.Release()
	fmt.Println(l.Protocol(), filepath.Base(l.Path()))
	// Output: dir cache.db.lock
}

// The refusals of Update and Append that concern the file's kind, owner
// and attributes, with what a program can do about each.
func ExampleError_refusals() {
	advice := func(err error) string {
		switch {
		case errors.Is(err, hold.ErrFileNotRegular):
			return "a device, socket or pipe cannot be replaced: write it directly"
		case errors.Is(err, hold.ErrOwnerNotKept):
			return "the new file could not keep the owner: pass hold.AllowOwnerChange() or run as the owner"
		case errors.Is(err, hold.ErrXattrNotKept):
			return "an extended attribute could not be copied: nothing was changed"
		case errors.Is(err, hold.ErrProtectedSymlink):
			return "a symlink someone else planted in a sticky directory: not followed"
		case errors.Is(err, hold.ErrUnavailable):
			return "the lock server is down: try again later"
		case err != nil:
			return err.Error()
		}
		return "done"
	}
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	conf := filepath.Join(dir, "app.conf")
	err := hold.Update(context.Background(), conf, func([]byte) ([]byte, error) { return []byte("x\n"), nil },
		hold.AllowOwnerChange())
	fmt.Println(advice(err))
	// Output: done
}

// Discard is Release for an operation that failed: the lock file it
// created does not outlive it (on Linux, where hold can prove that nobody
// else has it open).
func ExampleLock_Discard() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	l, err := hold.Acquire(context.Background(), filepath.Join(dir, "import.csv"))
	if err != nil {
		panic(err)
	}
	if err := importRows(); err != nil {
		fmt.Println(l.Discard(), err)
		return
	}
	l.Release()
	// Output: <nil> no rows to import
}

func importRows() error { return errors.New("no rows to import") }

// A named lock's name is checked before anything is touched; NamedDir
// says where this user's named locks live.
func ExampleValidName() {
	for _, name := range []string{"deploy", "nightly-db", "../etc", "Deploy"} {
		fmt.Println(name, hold.ValidName(name))
	}
	if _, err := hold.NamedDir(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// deploy true
	// nightly-db true
	// ../etc false
	// Deploy false
}

// FailIfHeldBy names the locks the caller holds and will not release while
// it waits: a wait for one of them is a deadlock at once, while a lock
// held elsewhere in the process would be waited for.
func ExampleFailIfHeldBy() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "data.db")

	mine, err := hold.Acquire(context.Background(), target)
	if err != nil {
		panic(err)
	}
	defer mine.Release()
	_, err = hold.Acquire(context.Background(), target, hold.FailIfHeldBy(mine))
	fmt.Println(errors.Is(err, hold.ErrDeadlock))
	// Output: true
}

// A program that writes the target itself under the lock (here through a
// new file renamed over it) says so with ForRewrite, as Update does.
func ExampleForRewrite() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "index.html")

	err := hold.Do(context.Background(), target, func(context.Context) error {
		tmp := target + ".new"
		if err := os.WriteFile(tmp, []byte("<h1>hi</h1>\n"), 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, target)
	}, hold.ForRewrite())
	fmt.Println(err)
	// Output: <nil>
}

// Logger shows what hold does, at slog's debug level.
func ExampleLogger() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	onlyMessage := func(groups []string, a slog.Attr) slog.Attr {
		if a.Key != slog.MessageKey {
			return slog.Attr{}
		}
		return a
	}
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: onlyMessage}))

	l, err := hold.Acquire(context.Background(), filepath.Join(dir, "data.db"), hold.Logger(log))
	if err != nil {
		panic(err)
	}
	l.Release()
	// Output:
	// msg="hold: acquired"
	// msg="hold: released"
}

// A program that lets its users choose a protocol by name lists the
// default, the kernel lock, beside the others; an option that applies
// nowhere in a call is refused, not ignored.
func ExampleDefaultProtocol() {
	protocols := map[string]hold.Protocol{}
	for _, p := range []hold.Protocol{hold.DefaultProtocol(), portable.New()} {
		protocols[p.Name()] = p
	}
	fmt.Println(len(protocols), protocols["flock"] != nil)

	_, err := hold.Inspect("data.db", hold.WithProtocol(protocols["flock"]), hold.MakeDirs())
	fmt.Println(errors.Is(err, hold.ErrInvalidOption))
	// Output:
	// 2 true
	// true
}

// A lock path that holds something other than a lock file (here a
// directory) is refused with ErrNotRegular, naming the path.
func ExampleInspect_notRegular() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	target := filepath.Join(dir, "build")
	os.Mkdir(target+".lock", 0o755)

	_, err := hold.Inspect(target)
	fmt.Println(errors.Is(err, hold.ErrNotRegular))
	// Output: true
}

// A job that holds one lock while it waits for a second. Should another
// job hold the second and wait for the first, one of the two waits (the
// one that began last) fails with ErrDeadlock after the delay, naming
// both jobs and locks, instead of both waiting for ever.
func ExampleDeadlockAfter() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	queue, err := hold.Acquire(ctx, filepath.Join(dir, "queue"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer queue.Release()
	db, err := hold.Acquire(ctx, filepath.Join(dir, "db"), hold.DeadlockAfter(2*time.Second))
	if errors.Is(err, hold.ErrDeadlock) {
		fmt.Println("gave up:", err) // release queue, and try again later
		return
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Release()
	fmt.Println("holding both")
	// Output: holding both
}

// A lock shared with Python programs that use filelock's SoftFileLock on
// the same file ("jobs.txt.lock"): held as theirs is, a plain file naming
// this process, which they wait for; it carries no fencing token.
func ExampleSoftFile() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	l, err := hold.Acquire(context.Background(), filepath.Join(dir, "jobs.txt"), hold.WithProtocol(portable.New()), hold.SoftFile())
	if err != nil {
		panic(err)
	}
	defer l.Release()
	fi, _ := os.Lstat(l.Path())
	record, _ := os.ReadFile(l.Path())
	pid, _, _ := strings.Cut(string(record), "\n")
	fmt.Println(filepath.Base(l.Path()), fi.Mode().IsRegular(), pid == strconv.Itoa(os.Getpid()))
	fmt.Println(l.Token(), errors.Is(l.TokenError(), hold.ErrNoToken))
	// Output:
	// jobs.txt.lock true true
	// 0 true
}

// A program written for proper-lockfile reads a lock directory whose time
// stamp someone else set as a lock another process took: Heartbeat sets
// its refresh interval (proper-lockfile's update) and LostIfTouched makes
// such a change a loss, as that program expects.
func ExampleLostIfTouched() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	l, err := hold.Acquire(context.Background(), filepath.Join(dir, "cache"), hold.WithProtocol(portable.New()),
		hold.Heartbeat(100*time.Millisecond), hold.LostIfTouched())
	if err != nil {
		panic(err)
	}
	past := time.Now().Add(-time.Hour)
	os.Chtimes(l.Path(), past, past) // another process touches the lock
	select {
	case <-l.Lost():
		fmt.Println("lost:", errors.Is(l.Release(), hold.ErrLost))
	case <-time.After(time.Minute):
		fmt.Println("still held")
	}
	// Output:
	// lost: true
}
