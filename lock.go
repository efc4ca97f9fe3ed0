package hold

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"

	"github.com/hold-dev/hold/internal/proc"
)

// Lock is a held lock. Release it when done; Release is idempotent and safe
// to defer. A Lock is safe for concurrent use.
type Lock struct {
	h      Handle
	target string
	path   string
	proto  string
}

// Acquire blocks until this process holds the lock on target, or ctx ends.
//
// The lock path is "<target>.lock" unless LockFile or Named says otherwise
// (target then only labels the lock and may be empty). Waiting sleeps in the
// kernel for kernel locks; when ctx ends, Acquire returns at once with an
// *Error that matches ErrTimeout (deadline) or context.Canceled and names the
// current holder, and the abandoned wait never leaves the lock held.
func Acquire(ctx context.Context, target string, opts ...Option) (*Lock, error) {
	c := newConfig(opts)
	req, err := c.request(target)
	if err != nil {
		return nil, err
	}
	h, err := c.protocol.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return c.refuseIfMachineLocal(&Lock{h: h, target: target, path: req.Path, proto: c.protocol.Name()})
}

// TryAcquire takes the lock on target if nobody holds it, and never waits.
// When someone does, it returns an *Error matching ErrBusy whose Holder
// describes them.
func TryAcquire(target string, opts ...Option) (*Lock, error) {
	c := newConfig(opts)
	req, err := c.request(target)
	if err != nil {
		return nil, err
	}
	h, err := c.protocol.TryAcquire(req)
	if err != nil {
		return nil, err
	}
	return c.refuseIfMachineLocal(&Lock{h: h, target: target, path: req.Path, proto: c.protocol.Name()})
}

// Do acquires the lock on target, runs fn, and releases the lock whatever fn
// does, a panic included (the panic then continues). It returns fn's error;
// when fn succeeded but the lock turned out to be lost, it returns the
// ErrLost error from Release, because fn's work was then not protected.
//
// The context fn receives is cancelled if the lock is lost while fn runs
// (possible with the portable and etcd protocols; the loss of a kernel
// lock, a removed or replaced lock file, is found only by Lock.Check).
func Do(ctx context.Context, target string, fn func(ctx context.Context) error, opts ...Option) (err error) {
	l, err := Acquire(ctx, target, opts...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ctx)
	if lost := l.Lost(); lost != nil {
		go func() {
			select {
			case <-lost:
				cancel(l.lostError())
			case <-fctx.Done():
			}
		}()
	}
	defer func() {
		cancel(nil)
		rerr := l.Release()
		if err == nil {
			err = rerr
		}
	}()
	return fn(fctx)
}

func (l *Lock) lostError() error {
	return &Error{Op: "hold", Path: l.path, Err: ErrLost}
}

// Release gives the lock up. It is idempotent: calls after the first return
// nil, unless the lock had been lost, which every call reports (ErrLost).
func (l *Lock) Release() error { return l.h.Release() }

// Token returns the fencing token of this acquisition: a number that
// strictly increases with every exclusive acquisition of the lock path,
// across processes and restarts. Pass it to the resource you write, and have
// the resource refuse writes carrying a smaller token than it has seen: that
// keeps a holder that was paused past losing its lock from doing harm. For a
// shared hold it is the token of the last exclusive holder. Zero means no
// token is available (a lock file this process may not write).
func (l *Lock) Token() uint64 { return l.h.Fence() }

// Owner returns the owner record this holder published.
func (l *Lock) Owner() Owner { return *l.h.Owner() }

// Lost returns a channel that is closed if the lock is found to be no
// longer this holder's. A kernel lock holds while this process keeps it;
// it is lost only if someone removes or replaces its lock file (newcomers
// then lock the new file), which Check detects, closing this channel.
func (l *Lock) Lost() <-chan struct{} { return l.h.Lost() }

// Check returns nil while the lock is held, and an error matching ErrLost or
// ErrReleased otherwise. Update calls it just before publishing.
func (l *Lock) Check() error { return l.h.Check() }

// Path returns the lock path.
func (l *Lock) Path() string { return l.path }

// Target returns the target the lock was taken for (may be empty).
func (l *Lock) Target() string { return l.target }

// Protocol returns the name of the protocol holding the lock: "flock",
// "dir" or "etcd".
func (l *Lock) Protocol() string { return l.proto }

// File returns the open lock file of a kernel lock, and nil for other
// protocols. A kernel lock belongs to the open file, so a child process
// given this file (exec.Cmd.ExtraFiles) shares the lock and keeps it held
// even if this process dies, which is what flock(1) does for its command.
func (l *Lock) File() *os.File {
	if f, ok := l.h.(interface{ File() *os.File }); ok {
		return f.File()
	}
	return nil
}

// Inspect reports the state of the lock on target without taking it: free,
// held exclusive or shared (decided by the lock itself, not by the record),
// the holder's owner record, whether the holder is alive, and the last
// fencing token. It never creates the lock file.
func Inspect(target string, opts ...Option) (*Status, error) {
	c := newConfig(opts)
	path, err := c.lockPath(target)
	if err != nil {
		return nil, err
	}
	return c.protocol.Inspect(path)
}

func (c *config) lockPath(target string) (string, error) {
	switch {
	case c.lockFile != "":
		return c.lockFile, nil
	case c.named:
		// Even Named(""): an empty name is invalid, not a request for
		// the default lock path.
		return namedPath(c.name, c.protocol)
	case target == "":
		return "", &Error{Op: "acquire", Path: target, Err: errors.New("no target, lock file or name given")}
	}
	return target + ".lock", nil
}

func (c *config) request(target string) (*Request, error) {
	path, err := c.lockPath(target)
	if err != nil {
		return nil, err
	}
	req := &Request{Path: path, Shared: c.shared, Owner: proc.Self(), Logger: c.logger, BeforeCreate: c.beforeCreate}
	req.Owner.ID = newID()
	if len(c.fields) > 0 {
		req.Owner.Fields = make(map[string]string, len(c.fields))
		for k, v := range c.fields {
			req.Owner.Fields[k] = v
		}
	}
	return req, nil
}

// newID returns a random acquisition id: 16 bytes, hex.
func newID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		// crypto/rand does not fail on supported platforms (Go 1.24+).
		panic(fmt.Sprintf("hold: crypto/rand: %v", err))
	}
	return hex.EncodeToString(b[:])
}
