package hold

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"github.com/hold-dev/hold/internal/atomicfile"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/lockpath"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// A target whose name ends in ".lock" (yarn.lock, Cargo.lock, an
// app.lock of flock(1)'s) is a lock file by its name, and often a data
// file too, which its tool saves by renaming a new file over it. Its lock
// path is its companion "<target>.lock" (lockpath.FromTarget), which
// nothing renames; the target itself is locked as well, after the
// companion, with a kernel lock that writes nothing into it (its "own
// lock"), so that flock(1) users of the file, holders of "app" (whose
// lock path is app.lock) and earlier versions of hold, which locked the
// file directly, are kept apart from this holder while that inode is the
// file.

// ownTarget returns the file whose own kernel lock a holder of target
// takes besides its lock path, or "" when there is none to take: a lock
// path chosen by LockFile or Named, a protocol with its own namespace, a
// target whose name does not end in ".lock" (its lockers all take
// "<target>.lock"), or a directory (locked through its companion only).
// A symbolic link is followed, as flock(1) and an update follow it.
func (c *config) ownTarget(target string) (string, error) {
	if c.lockFile != "" || c.named || target == "" {
		return "", nil
	}
	if _, ok := c.protocol.(lock.Namer); ok {
		return "", nil
	}
	own, ok := lockpath.Own(target)
	if !ok {
		return "", nil
	}
	if c.rewrite {
		// The file the update replaces, which must be one it may write.
		t, err := atomicfile.Locate(atomicfile.OS{}, own)
		if err != nil {
			return "", fileError("acquire", target, err)
		}
		return t.Path, nil
	}
	p, err := filepath.EvalSymlinks(own)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Missing (or a dangling link): the lock creates it, as
		// flock(1) does.
		return own, nil
	case err != nil:
		return "", fileError("acquire", target, err)
	}
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		if err := refusePortableOwn(target, p); err != nil {
			return "", err
		}
		return "", nil
	}
	return p, nil
}

// refusePortableOwn refuses target, a lock file by its name whose file,
// dir, is a directory, when that directory is a lock of the portable
// protocol: the lock of a target named "X.lock" excludes the holders of
// X by locking X.lock itself, and a portable holder of X holds X.lock by
// its existence, which no kernel lock here would exclude. `hold run -n
// pdir.lock -- cmd` ran cmd beside `hold run --protocol dir pdir`, and
// `hold run -n --lock-file pdir.lock`, which locks the same directory,
// was refused (issue 53). Every way of taking target's own lock passes
// here (ownTarget), and a lock path about to be created beside it
// (refuseSpecialTarget), so that nothing is made for a request that is
// refused.
func refusePortableOwn(target, dir string) error {
	if !flock.IsPortableLock(dir) {
		return nil
	}
	x := strings.TrimSuffix(filepath.Base(filepath.Clean(target)), ".lock")
	return &Error{Op: "acquire", Path: dir, Err: ErrNotRegular,
		Hint: "it is a directory lock of the portable protocol, as hold run --protocol dir " + x + " and Node's proper-lockfile take it, " +
			"and a target named *.lock is locked itself too: a kernel lock would not exclude its holder; lock " + x +
			" with --protocol dir, as its holder does"}
}

// refuseReplacingOwnLock refuses, on Windows, an Update of a file that is
// a lock file by name (see ForRewrite). Its own kernel lock must be
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
		Hint: "on Windows a file whose name ends in .lock is locked itself too, and cannot be held while a new version is renamed over it; " +
			"rename the data file, or give its lock explicitly (hold update --lock-file FILE.lock.lock, LockFile in Go) and have every holder use that lock"}
}

// lockOwn takes the own kernel lock of target (see ownTarget) once h, its
// lock path, is held, and returns the handle that holds both; on failure
// it releases h. A wait for it that could never end (its holder is this
// process, or an ancestor waiting for this one) fails at once with
// ErrDeadlock, as a wait for the lock path does.
func (c *config) lockOwn(ctx context.Context, h Handle, target string, block bool) (Handle, error) {
	path, err := c.ownTarget(target)
	if err != nil || path == "" {
		if err != nil {
			h.Release()
		}
		return h, err
	}
	// A slot holder holds the lock file shared (internal/flock's
	// slots.go), and the target's own file the same way.
	o := flock.DataOptions{Create: !c.mustExist, Shared: c.shared || c.slots > 1, HolderReplaces: !c.rewrite}
	var d *flock.DataLock
	if block && c.dl.TryFirst() {
		d, err = flock.LockData(ctx, path, o)
		if derr := c.dl.Busy(&Request{Path: path, Shared: o.Shared}, err); derr != nil {
			h.Release()
			return nil, derr
		}
	}
	if d == nil {
		o.Block = block
		d, err = flock.LockData(ctx, path, o)
	}
	if err != nil {
		h.Release()
		if errors.Is(err, os.ErrNotExist) {
			return nil, fileError("acquire", target, err)
		}
		return nil, err
	}
	return &ownHandle{Handle: h, own: d}, nil
}

// ownAlone returns the request that locks target's own file alone, as
// flock(1) and earlier versions of hold lock it, when req, its companion,
// could not be made because this process may not create files in that
// directory (or the filesystem is read-only): a lock file there that the
// user may lock but not make a companion beside. Its tool cannot replace
// the file there either (a rename needs the directory's write
// permission), so the file alone is one lock. ok is false for any other
// failure, and for a target that is not a lock file by name, does not
// exist or is not a regular file.
func (c *config) ownAlone(target string, req *Request, err error) (r *Request, ok bool) {
	if err == nil || c.rewrite || c.base.Name() != "flock" || !errors.Is(err, fs.ErrPermission) && !errors.Is(err, syscall.EROFS) {
		return nil, false
	}
	if _, serr := os.Lstat(req.Path); !errors.Is(serr, fs.ErrNotExist) {
		// The companion exists: a permission problem of its own.
		return nil, false
	}
	own, oerr := c.ownTarget(target)
	if oerr != nil || own == "" {
		return nil, false
	}
	if fi, serr := os.Stat(own); serr != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	alone := *req
	alone.Path, alone.Explicit, alone.BeforeCreate = own, true, nil
	return &alone, true
}

// ownHandle is the lock of a holder of a target that is a lock file by
// name: the lock path (the companion), and the file's own kernel lock.
type ownHandle struct {
	Handle
	own *flock.DataLock
}

// Unwrap gives the lock path's handle, whose capabilities (the token's
// reason, the file) are the lock's.
func (h *ownHandle) Unwrap() Handle { return h.Handle }

// File returns the lock path's open file, for a kernel lock.
func (h *ownHandle) File() *os.File {
	if f, ok := h.Handle.(lock.Filer); ok {
		return f.File()
	}
	return nil
}

// Check checks both locks. The own lock of an update fails if someone
// else replaced the file; that of any other holder never does, since the
// holder may replace the file itself (see flock.DataOptions.HolderReplaces).
func (h *ownHandle) Check() error {
	if err := h.Handle.Check(); err != nil {
		return err
	}
	return h.own.Check()
}

// Release lets go of the file first, then of the lock path: the reverse
// of the order every holder takes them in.
func (h *ownHandle) Release() error {
	derr := h.own.Release()
	err := h.Handle.Release()
	if err == nil {
		err = derr
	}
	return err
}

// fenceAbove is lock.Request.FenceAbove for target: the file itself, for a
// target named "*.lock" whose lock path is its companion, so that the
// companion's tokens continue those that earlier versions of hold, which
// locked the file itself, wrote there. (Read only while the companion has
// no token yet: it costs nothing after.)
func (c *config) fenceAbove(target string) string {
	if c.lockFile != "" || c.named || target == "" {
		return ""
	}
	if _, ok := c.protocol.(lock.Namer); ok {
		return ""
	}
	own, _ := lockpath.Own(target)
	return own
}

// inspectOwn is Inspect's look at the own lock of target (see ownTarget)
// when its lock path st is free, or held by this very process (which then
// waits for the file's own lock, as `hold run` asks while it waits): a
// holder of the file itself (flock(1), a holder of "app" for "app.lock",
// an earlier version of hold that locked the file directly) keeps this
// target's holders out as well, so Inspect reports it, at the file's path.
func (c *config) inspectOwn(st *Status, target string) *Status {
	if st == nil || c.rewrite || st.State != Free && !heldBySelf(st.Holder) {
		return st
	}
	path, err := c.ownTarget(target)
	if err != nil || path == "" {
		return st
	}
	if own, err := (flock.Protocol{}).Inspect(path); err == nil && own.State != Free {
		return own
	}
	return st
}

// heldBySelf reports whether h names this process as the holder, by the
// kernel's word where it can be asked, else by the record.
func heldBySelf(h *Holder) bool {
	if h == nil {
		return false
	}
	if len(h.PIDs) > 0 {
		return len(h.PIDs) == 1 && h.PIDs[0] == os.Getpid()
	}
	return h.Owner != nil && h.Owner.PID == os.Getpid() && proc.Local(h.Owner)
}
