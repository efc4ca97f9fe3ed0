package hold

import (
	"context"
	"errors"
	"os"
	"runtime"

	"github.com/hold-dev/hold/internal/atomicfile"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/lockpath"
	"github.com/hold-dev/hold/lock"
)

// dataTarget returns the file target is, whose own kernel lock a
// ForRewrite holder takes besides its lock path, or "" when there is none
// to take: no ForRewrite, a lock path chosen by LockFile or Named, a
// protocol with its own namespace, or a target whose name does not make
// it a lock file (its lockers all take "<target>.lock").
func (c *config) dataTarget(target string) (string, error) {
	if !c.rewrite || c.lockFile != "" || c.named || target == "" || !lockpath.IsOwn(target) {
		return "", nil
	}
	if _, ok := c.protocol.(lock.Namer); ok {
		return "", nil
	}
	// The file the update replaces: a symbolic link is followed, as the
	// update follows it.
	t, err := atomicfile.Locate(atomicfile.OS{}, target)
	if err != nil {
		return "", fileError("acquire", target, err)
	}
	return t.Path, nil
}

// refuseReplacingOwnLock refuses, on Windows, an Update of a file that is
// its own lock file by name (see ForRewrite). Its own kernel lock must be
// held across the rename that replaces it, and Windows without POSIX
// rename semantics (before Windows 10, and wine) cannot rename over a
// file that is open, whatever it shares: the update would fail after its
// retries every time. Releasing that lock before the rename instead would
// let a holder of x.lock change it in between and have its change
// overwritten. Append, which writes in place, is not refused.
func (c *config) refuseReplacingOwnLock(target string) error {
	if runtime.GOOS != "windows" || c.lockFile != "" || c.named || !lockpath.IsOwn(target) {
		return nil
	}
	if _, ok := c.protocol.(lock.Namer); ok {
		return nil
	}
	return &Error{Op: "update", Path: target, Err: ErrUnsupported,
		Hint: "on Windows a file whose name ends in .lock is its own lock file, which cannot be held while a new version is renamed over it; " +
			"rename the data file, or give its lock explicitly (hold update --lock-file FILE.lock.lock, LockFile in Go) and have every holder use that lock"}
}

// lockData takes the kernel lock of the data file of a ForRewrite holder
// (see dataTarget) once h, its lock path, is held, and returns the handle
// that holds both; on failure it releases h.
func (c *config) lockData(ctx context.Context, h Handle, target string, block bool) (Handle, error) {
	path, err := c.dataTarget(target)
	if err != nil || path == "" {
		if err != nil {
			h.Release()
		}
		return h, err
	}
	d, err := flock.LockData(ctx, path, block, !c.mustExist)
	if err != nil {
		h.Release()
		if errors.Is(err, os.ErrNotExist) {
			return nil, fileError("acquire", target, err)
		}
		return nil, err
	}
	return &rewriteHandle{Handle: h, data: d}, nil
}

// rewriteHandle is the lock of a ForRewrite holder of a file that is its
// own lock file: the lock path, and the file's own kernel lock.
type rewriteHandle struct {
	Handle
	data *flock.DataLock
}

// Unwrap gives the lock path's handle, whose capabilities (the token's
// reason, the file) are the lock's.
func (h *rewriteHandle) Unwrap() Handle { return h.Handle }

// File returns the lock path's open file, for a kernel lock.
func (h *rewriteHandle) File() *os.File {
	if f, ok := h.Handle.(lock.Filer); ok {
		return f.File()
	}
	return nil
}

// Check checks both locks: the data file's fails if someone replaced it.
func (h *rewriteHandle) Check() error {
	if err := h.Handle.Check(); err != nil {
		return err
	}
	return h.data.Check()
}

// Release lets go of the data file first, then of the lock path: the
// reverse of the order every writer takes them in.
func (h *rewriteHandle) Release() error {
	derr := h.data.Release()
	err := h.Handle.Release()
	if err == nil {
		err = derr
	}
	return err
}
