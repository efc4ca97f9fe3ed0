package lock

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// The sentinel errors. An *Error wraps one of them (or an OS error), so
// callers test with errors.Is.
var (
	// ErrBusy means the lock is held by someone else and the caller asked not
	// to wait.
	ErrBusy = errors.New("lock is busy")
	// ErrTimeout means the wait ended because its deadline passed. An
	// error that matches it also matches context.DeadlineExceeded (see
	// WaitError).
	ErrTimeout = errors.New("timed out waiting for lock")
	// ErrLost means a lock that was held is no longer this holder's: it was
	// removed or replaced by someone else, or its lease expired.
	ErrLost = errors.New("lock was lost")
	// ErrInvalidName means a lock name is not one lowercase, path-free
	// component of bounded length, or a target names no lock path (the
	// root directory).
	ErrInvalidName = errors.New("invalid lock name")
	// ErrUnsupported means the filesystem (or platform) refuses this kind of
	// lock.
	ErrUnsupported = errors.New("locking not supported here")
	// ErrNotRegular means the lock path exists but is not a regular file (a
	// symlink, directory, FIFO or device), so hold will not use it.
	ErrNotRegular = errors.New("lock path is not a regular file")
	// ErrReleased means the operation needs a held lock and this one has
	// already been released.
	ErrReleased = errors.New("lock already released")
	// ErrForeign means the lock path holds something hold did not create
	// (a data file, another tool's file, a hard link, a directory with
	// other content), which hold will neither write, nor delete, nor use
	// as a lock of its own. hold.LockFile locks such a file the way
	// flock(1) does, without writing it.
	ErrForeign = errors.New("lock path holds something hold did not create")
	// ErrNoToken means a held lock has no fencing token: its lock file is
	// not hold's to write (another user's, foreign content), or its
	// protocol keeps none (see hold.Lock.TokenError).
	ErrNoToken = errors.New("no fencing token")
	// ErrLockIsTarget means an update or append was asked to lock the
	// very file it changes (hold.LockFile naming the target). Nothing is
	// written.
	ErrLockIsTarget = errors.New("the lock file is the file being changed")
	// ErrDeadlock means the wait could never end: the lock is held by the
	// caller itself, which cannot release it while it waits, or kept only
	// by ancestors that wait for the caller to end. The error names the
	// holder and says why instead of hanging.
	ErrDeadlock = errors.New("deadlock")
	// ErrInvalidOption means an option was passed to an entry point it
	// does not apply to (hold.AllowSplit to hold.Append, say), which would
	// otherwise ignore it. The error names the option and the entry point
	// and says where the option applies. Nothing was locked or changed.
	ErrInvalidOption = errors.New("option does not apply here")
	// ErrSlotCount means a semaphore was asked for with a number of slots
	// other than the one its holders use (see Semaphore). The error names
	// the number in use; nothing was taken.
	ErrSlotCount = errors.New("semaphore is held with another number of slots")
)

// Liveness says whether a lock holder's process still runs.
type Liveness int

// The values of Liveness.
const (
	// LivenessUnknown: hold could not tell (another host, no record, no
	// permission to ask).
	LivenessUnknown Liveness = iota
	// Alive: the holder process runs.
	Alive
	// Dead: the holder process is gone (or its pid now belongs to another
	// process).
	Dead
)

// String returns "alive", "dead" or "unknown".
func (l Liveness) String() string {
	switch l {
	case Alive:
		return "alive"
	case Dead:
		return "dead"
	}
	return "unknown"
}

// Holder describes who holds a lock, as far as it could be found out.
type Holder struct {
	// Owner is the holder's owner record; nil when there is none or it
	// could not be read.
	Owner *Owner
	// PIDs are the processes the kernel says keep the lock (Linux, kernel
	// locks): those /proc/locks names, or, when one of them has ended or
	// closed its descriptor since, the processes with a descriptor open
	// on the open file description that holds it (a subshell keeping the
	// descriptor the shell lent `hold run -n 9`, a child of a dead
	// holder). Empty where it cannot be asked.
	PIDs []int
	// Alive says whether the holder process runs.
	Alive Liveness
	// Commands gives, for each pid in PIDs, its command line where known.
	Commands map[int]string
}

// String describes the holder in one phrase for an error message, e.g.
// "pid 4242 (hold run -- make) on host a1 for 12.4s, alive".
func (h *Holder) String() string {
	if h == nil {
		return "an unknown holder"
	}
	var b strings.Builder
	o := h.Owner
	pid := 0
	if o != nil {
		pid = o.PID
	}
	// Prefer a pid the kernel vouches for when the record names another
	// (an inherited descriptor, or a holder that is not hold at all).
	if len(h.PIDs) > 0 && !containsInt(h.PIDs, pid) {
		fmt.Fprintf(&b, "pid %s", joinInts(h.PIDs))
		if c := h.Commands[h.PIDs[0]]; c != "" {
			fmt.Fprintf(&b, " (%s)", oneLine(c))
		}
		if o != nil && o.PID != 0 {
			fmt.Fprintf(&b, ", recorded owner pid %d", o.PID)
			if h.Alive == Dead {
				b.WriteString(" (dead)")
			}
		}
		return b.String()
	}
	if o == nil || o.PID == 0 {
		b.WriteString("an unknown holder (no owner record)")
		return b.String()
	}
	fmt.Fprintf(&b, "pid %d", o.PID)
	if len(o.Command) > 0 {
		fmt.Fprintf(&b, " (%s)", shorten(oneLine(strings.Join(o.Command, " ")), 60))
	} else if c := h.Commands[o.PID]; c != "" {
		fmt.Fprintf(&b, " (%s)", shorten(oneLine(c), 60))
	}
	if o.Host != "" {
		fmt.Fprintf(&b, " on host %s", o.Host)
	}
	if !o.StartedAt.IsZero() {
		fmt.Fprintf(&b, " for %s", o.Held(time.Now()).Round(100*time.Millisecond))
	}
	if h.Alive != LivenessUnknown {
		fmt.Fprintf(&b, ", %s", h.Alive)
	}
	return b.String()
}

// Error records a failed lock operation: what was tried, on which lock path,
// why it failed and, where known, who holds the lock. It plays the part
// os.PathError plays for files.
type Error struct {
	// Op is the operation: "acquire", "release", "update", "append", ...
	Op string
	// Path is the lock path (or the target, for update and append errors
	// that concern the file itself).
	Path string
	// Err is the cause: one of the sentinels or an OS error.
	Err error
	// Holder is who holds the lock, when the error is about contention.
	Holder *Holder
	// Hint says what to do about it, when hold knows.
	Hint string
}

// Error returns "op path: cause", then who holds the lock and the hint
// where known.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	b.WriteByte(' ')
	b.WriteString(e.Path)
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	if e.Holder != nil {
		b.WriteString(": held by ")
		b.WriteString(e.Holder.String())
	}
	if e.Hint != "" {
		b.WriteString(" (")
		b.WriteString(e.Hint)
		b.WriteByte(')')
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func containsInt(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

// oneLine writes a command line's line breaks and tabs as \n, \r and
// \t, so that a multi-line shell command (hold run -c 'a
// b') stays on the one line of a message, and in its column of a table.
func oneLine(s string) string { return lineBreaks.Replace(s) }

var lineBreaks = strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`)

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// ExclusiveOnly returns the error of a protocol that has exclusive locks
// only (the portable, etcd and PostgreSQL protocols) for a request of a
// shared lock. It matches ErrUnsupported, and ErrInvalidOption too: the
// request is what must change, so front ends report it as bad usage (the
// command line's exit 64), not as a lock that cannot be used.
func ExclusiveOnly(op, path, protocol string) *Error {
	return &Error{Op: op, Path: path, Err: exclusiveOnly{},
		Hint: "the " + protocol + " protocol has exclusive locks only; kernel locks, the default protocol, have shared ones"}
}

type exclusiveOnly struct{}

func (exclusiveOnly) Error() string { return "shared locks are not supported by this protocol" }
func (exclusiveOnly) Is(target error) bool {
	return target == ErrUnsupported || target == ErrInvalidOption
}

// ErrUnavailable means the server that keeps a network lock (an etcd
// cluster, a PostgreSQL server) could not be reached or did not answer in
// time: the service is the problem, not the lock or the request. A
// protocol's own error for it matches ErrUnavailable (see Unavailable).
var ErrUnavailable = errors.New("lock server unavailable")

// Unavailable returns a protocol's sentinel error for a server it cannot
// reach, with msg as its text ("etcd unreachable"); it matches
// ErrUnavailable.
func Unavailable(msg string) error { return unavailable(msg) }

type unavailable string

func (e unavailable) Error() string      { return string(e) }
func (unavailable) Is(target error) bool { return target == ErrUnavailable }
