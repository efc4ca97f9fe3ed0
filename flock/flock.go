package flock

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/hold-dev/hold"
)

// Option changes how New opens and creates the lock file.
type Option func(f *Flock)

// SetFlag sets the flags the lock file is opened with. hold opens the file
// itself and needs no access mode, so only os.O_CREATE counts: without it,
// locking a missing file fails with an error matching fs.ErrNotExist
// instead of creating it.
func SetFlag(flag int) Option {
	return func(f *Flock) { f.flag = flag }
}

// SetPermissions sets the permission bits (under the umask) of a lock file
// that locking creates; an existing file keeps its own. The default is
// 0600, as gofrs/flock's.
func SetPermissions(perm fs.FileMode) Option {
	return func(f *Flock) { f.perm = perm }
}

// Flock is a file lock on one path. It is safe for concurrent use; one
// Flock holds the lock once, shared or exclusive, whichever goroutine took
// it. Lock and RLock hold an internal mutex while they wait, so Locked and
// RLocked wait for them, as under gofrs/flock.
type Flock struct {
	path string
	flag int
	perm fs.FileMode

	m sync.RWMutex
	// held is the lock while one is held; l and r say which modes were
	// asked for, as gofrs/flock keeps them (both are true after a
	// conversion, and held is then in the last mode taken).
	held *hold.Lock
	l, r bool
}

// New returns a Flock for path, which is created when it is first locked
// unless SetFlag says otherwise. Nothing is opened until then.
func New(path string, opts ...Option) *Flock {
	f := &Flock{path: path, flag: os.O_CREATE, perm: 0o600}
	for _, o := range opts {
		o(f)
	}
	return f
}

// NewFlock returns New(path).
//
// Deprecated: Use New, as gofrs/flock says too.
func NewFlock(path string) *Flock { return New(path) }

// Path returns the path given to New.
func (f *Flock) Path() string { return f.path }

// String returns the path given to New.
func (f *Flock) String() string { return f.path }

// Locked reports whether this Flock holds the exclusive lock. The answer
// may be out of date as soon as it is returned.
func (f *Flock) Locked() bool {
	f.m.RLock()
	defer f.m.RUnlock()
	return f.l
}

// RLocked reports whether this Flock holds the shared lock. The answer
// may be out of date as soon as it is returned.
func (f *Flock) RLocked() bool {
	f.m.RLock()
	defer f.m.RUnlock()
	return f.r
}

// Stat describes the lock file: the open one while the lock is held, the
// one at the path otherwise (an error matching fs.ErrNotExist when there
// is none yet).
func (f *Flock) Stat() (fs.FileInfo, error) {
	f.m.RLock()
	defer f.m.RUnlock()
	if f.held != nil {
		if fh := f.held.File(); fh != nil {
			return fh.Stat()
		}
	}
	return os.Stat(f.path)
}

// Lock waits until this Flock holds the lock exclusively. It returns at
// once if it already does. While RLocked, the shared lock is given up and
// the exclusive one taken, as flock(2) converts a lock.
func (f *Flock) Lock() error { return f.lock(false) }

// RLock waits until this Flock holds the lock shared, beside any other
// shared holders. It returns at once if it already does.
func (f *Flock) RLock() error { return f.lock(true) }

// TryLock takes the lock exclusively if nobody else holds it, and never
// waits: (false, nil) means someone does, an error that the lock could not
// be tried at all.
func (f *Flock) TryLock() (bool, error) { return f.try(false) }

// TryRLock takes the lock shared unless someone holds it exclusively, and
// never waits, with TryLock's results.
func (f *Flock) TryRLock() (bool, error) { return f.try(true) }

// TryLockContext calls TryLock every retryDelay until it takes the lock,
// fails, or ctx ends (it then returns false and ctx's error).
func (f *Flock) TryLockContext(ctx context.Context, retryDelay time.Duration) (bool, error) {
	return retry(ctx, retryDelay, f.TryLock)
}

// TryRLockContext calls TryRLock every retryDelay until it takes the lock,
// fails, or ctx ends (it then returns false and ctx's error).
func (f *Flock) TryRLockContext(ctx context.Context, retryDelay time.Duration) (bool, error) {
	return retry(ctx, retryDelay, f.TryRLock)
}

// Unlock gives the lock up, whichever mode it is held in, and closes the
// lock file; the file stays on disk. Unlock of a Flock that holds nothing
// returns nil. A lock found lost while held (its file removed or replaced
// by someone) is given up too, and Unlock then reports hold.ErrLost.
func (f *Flock) Unlock() error {
	f.m.Lock()
	defer f.m.Unlock()
	if f.held == nil {
		f.l, f.r = false, false
		return nil
	}
	err := f.held.Release()
	f.held, f.l, f.r = nil, false, false
	return err
}

// Close is Unlock.
func (f *Flock) Close() error { return f.Unlock() }

// Held returns the hold lock behind this Flock while it holds one (its
// fencing token, owner record, Lost channel), and nil otherwise. Release
// it through Unlock, not directly.
func (f *Flock) Held() *hold.Lock {
	f.m.RLock()
	defer f.m.RUnlock()
	return f.held
}

// Status says whether the path is locked and by whom (the holder's owner
// record and pids, when hold or the kernel can tell), without taking the
// lock; any process may ask. It never creates the file.
func (f *Flock) Status() (*hold.Status, error) {
	return hold.Inspect(f.path, hold.LockFile(f.path))
}

// options are hold's options for a lock in one mode.
func (f *Flock) options(shared bool) []hold.Option {
	opts := []hold.Option{hold.LockFile(f.path), hold.LockFileMode(f.perm)}
	if shared {
		opts = append(opts, hold.Shared())
	}
	return opts
}

// mustExist returns the error a missing lock file is without O_CREATE,
// the one opening it would give.
func (f *Flock) mustExist() error {
	if f.flag&os.O_CREATE != 0 {
		return nil
	}
	_, err := os.Stat(f.path)
	return err
}

// mode returns the flag for a mode; held tells whether this Flock holds
// the lock in the other mode, which it then gives up first.
func (f *Flock) mode(shared bool) (flag *bool, other bool) {
	if shared {
		return &f.r, f.held != nil && !f.r
	}
	return &f.l, f.held != nil && !f.l
}

func (f *Flock) lock(shared bool) error {
	f.m.Lock()
	defer f.m.Unlock()
	flag, other := f.mode(shared)
	if *flag {
		return nil
	}
	if err := f.mustExist(); err != nil {
		return err
	}
	if other {
		// A Flock holds one lock, as gofrs's holds one descriptor:
		// taking the other mode through a second one would wait for
		// this one forever.
		if err := f.held.Release(); err != nil {
			f.held, f.l, f.r = nil, false, false
			return err
		}
		f.held = nil
	}
	l, err := hold.Acquire(context.Background(), f.path, f.options(shared)...)
	if err != nil {
		if other {
			f.l, f.r = false, false
		}
		return err
	}
	f.held, *flag = l, true
	return nil
}

func (f *Flock) try(shared bool) (bool, error) {
	f.m.Lock()
	defer f.m.Unlock()
	flag, other := f.mode(shared)
	if *flag {
		return true, nil
	}
	if err := f.mustExist(); err != nil {
		return false, err
	}
	if other {
		if err := f.held.Release(); err != nil {
			f.held, f.l, f.r = nil, false, false
			return false, err
		}
		f.held = nil
	}
	l, err := hold.TryAcquire(f.path, f.options(shared)...)
	if err == nil {
		f.held, *flag = l, true
		return true, nil
	}
	if other {
		// Take the mode given up back, so that a failed conversion
		// leaves what was held; if even that is busy now, nothing is.
		back, berr := hold.TryAcquire(f.path, f.options(!shared)...)
		if berr == nil {
			f.held = back
		} else {
			f.l, f.r = false, false
		}
	}
	if errors.Is(err, hold.ErrBusy) {
		return false, nil
	}
	return false, err
}

// retry calls try every delay until it takes the lock, fails, or ctx ends.
func retry(ctx context.Context, delay time.Duration, try func() (bool, error)) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		if ok, err := try(); ok || err != nil {
			return ok, err
		}
		t.Reset(delay)
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-t.C:
		}
	}
}
