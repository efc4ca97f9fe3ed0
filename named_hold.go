package hold

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"

	"github.com/hold-dev/hold/internal/nameddir"
	"github.com/hold-dev/hold/lock"
)

// A named lock is held together with two things that keep it the only
// one of its name:
//
//   - a shared flock(2) on the named-lock directory, taken before the
//     lock file is opened and kept until Release: systemd-tmpfiles skips
//     a directory it cannot lock exclusively, so it never ages away a
//     lock file that is held or waited for (see internal/nameddir);
//   - the lock of the same name where earlier versions of hold kept
//     named locks ($XDG_RUNTIME_DIR/hold, hold-UID in the temp
//     directory), when a lock file is there: a holder that an older hold
//     started there, or one that still runs, is then waited for (or
//     reported busy) rather than joined. A lock file that does not exist
//     there is not created, so only an old hold that creates its file
//     for the first time in the same instant could slip past.
//
// Both live in this process: when `hold run`'s own process is killed and
// its command keeps the main lock, the two go with it.

// namedHandle is a named lock's handle and what it holds besides.
type namedHandle struct {
	Handle
	closers []func() error
	once    sync.Once // the closers run once, whoever releases
}

// errNoOldFile ends the acquisition of an earlier place's lock whose file
// has gone: it is not created.
var errNoOldFile = errors.New("no lock file at the earlier place")

// beginNamed takes the directory's shared lock for a named local lock,
// before the lock itself; it returns nil for every other lock.
func (c *config) beginNamed(req *Request) *namedHandle {
	if !c.named {
		return nil
	}
	if _, ok := c.protocol.(lock.Namer); ok {
		return nil
	}
	n := &namedHandle{}
	if f := lockDirShared(filepath.Dir(req.Path)); f != nil {
		n.closers = append(n.closers, f.Close)
	}
	return n
}

// finish adds the main handle h and takes the locks of the same name at
// the earlier places: waiting for them with ctx, or only trying when wait
// is false (TryAcquire). On failure everything is released.
func (n *namedHandle) finish(ctx context.Context, wait bool, c *config, req *Request, h Handle) (Handle, error) {
	if n == nil {
		return h, nil
	}
	n.Handle = h
	name := filepath.Base(req.Path)
	for _, dir := range nameddir.EarlierOwn() {
		p := filepath.Join(dir, name)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		r := *req
		r.Path = p
		r.Explicit = true
		r.BeforeCreate = func() error { return errNoOldFile }
		var oh Handle
		var err error
		if !wait {
			oh, err = c.base.TryAcquire(&r)
		} else {
			oh, err = c.base.Acquire(ctx, &r)
		}
		if errors.Is(err, errNoOldFile) {
			continue
		}
		if err != nil {
			h.Release()
			n.closeAll()
			var e *Error
			if errors.As(err, &e) && e.Hint == "" {
				e.Hint = "this name is held at " + dir + ", where earlier versions of hold kept named locks; hold now waits for that holder too"
			}
			return nil, err
		}
		n.closers = append(n.closers, oh.Release)
	}
	return n, nil
}

// abort releases what beginNamed took when the main lock was not had.
func (n *namedHandle) abort() {
	if n != nil {
		n.closeAll()
	}
}

func (n *namedHandle) closeAll() {
	n.once.Do(func() {
		for i := len(n.closers) - 1; i >= 0; i-- {
			n.closers[i]()
		}
	})
}

// Release gives up the main lock, then the rest; its result is the main
// lock's.
func (n *namedHandle) Release() error {
	err := n.Handle.Release()
	n.closeAll()
	return err
}

// File passes on the main handle's lock file (kernel locks).
func (n *namedHandle) File() *os.File {
	if f, ok := n.Handle.(lock.Filer); ok {
		return f.File()
	}
	return nil
}

// Unwrap returns the main handle: namedHandle is a lock.Wrapper.
func (n *namedHandle) Unwrap() Handle { return n.Handle }

// inspectEarlier reports a holder of the name at an earlier place when
// the lock at the new place, st, is free.
func (c *config) inspectEarlier(st *Status, path string) *Status {
	if !c.named || st == nil || st.State != Free {
		return st
	}
	if _, ok := c.protocol.(lock.Namer); ok {
		return st
	}
	for _, dir := range nameddir.EarlierOwn() {
		p := filepath.Join(dir, filepath.Base(path))
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if old, err := c.base.Inspect(p); err == nil && old.State != Free {
			return old
		}
	}
	return st
}
