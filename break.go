package hold

import (
	"errors"
	"os"

	"github.com/hold-dev/hold/internal/lockpath"
	"github.com/hold-dev/hold/lock"
	"github.com/hold-dev/hold/portable"
)

// Break removes the lock on target when its holder is provably gone (the
// rules a waiter applies before taking a lock over), and refuses a live
// holder with an error matching ErrBusy that says who it is. With force it
// removes the lock whatever its state; the holder, if alive, finds its lock
// lost. It returns the state it found, so a caller can show the record it
// removed; nothing at the lock path is not an error (the state is Free).
//
// Only locks that can outlive their holder can be broken: those of a
// protocol that implements lock.Breaker (package portable's, etcd's,
// PostgreSQL's), chosen with WithProtocol, and a directory found at the
// lock path, which is a portable lock whatever protocol was chosen. A
// kernel lock is freed by the kernel when its holder dies, so breaking one
// fails with ErrUnsupported.
func Break(target string, force bool, opts ...Option) (*Status, error) {
	c, err := configFor(inBreak, target, opts)
	if err != nil {
		return nil, err
	}
	path, err := c.lockPath(target)
	if err != nil {
		return nil, err
	}
	// The protocol past the fair queue, which breaks nothing itself.
	b, ok := c.base.(lock.Breaker)
	if !ok {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			// Nothing at the lock path; a target named "*.lock" may
			// still be held itself (flock(1), an earlier hold), which
			// is a kernel lock, refused below.
			st := c.inspectOwn(&Status{Path: path, Protocol: c.protocol.Name()}, target)
			if st.State == Free {
				return st, nil
			}
			path = st.Path
		}
		if lockpath.IsDirLock(path) {
			b, ok = portable.New(), true
		}
	}
	if !ok {
		st, _ := c.protocol.Inspect(path)
		return st, &Error{Op: "break", Path: path, Err: notBreakable{},
			Hint: "the kernel frees a " + c.protocol.Name() + " lock when its holder dies, so it is never stale; " +
				"a held one has a live holder, which `hold status` names"}
	}
	return b.Break(path, force)
}

// notBreakable is Break's cause for a kernel lock. It matches
// ErrUnsupported, the documented cause, but says what is true: locking
// works here; only breaking does not apply.
type notBreakable struct{}

func (notBreakable) Error() string        { return "a kernel lock cannot be broken" }
func (notBreakable) Is(target error) bool { return target == ErrUnsupported }
