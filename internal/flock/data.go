package flock

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"

	"github.com/hold-dev/hold/lock"
)

// DataLock is a kernel lock on a data file, taken by a holder of a target
// that is a lock file by name ("x.lock", "yarn.lock") besides the lock
// path, its companion "x.lock.lock": hold's update of such a file, which
// replaces it by rename, and any other holder, whose command may replace
// it too (a package manager saving its lock file). It writes nothing into
// the file, whatever the file holds: the file is the user's data.
//
// Why an update's lock excludes the file's other lockers although the
// rename replaces the locked inode: it is taken, and the path checked to
// still name the locked inode, before the file is read, and it is held
// until after the rename. Every kernel locker of hold checks after its own flock(2) that
// the path still names what it locked and starts again otherwise
// (Protocol's acquire), so a locker that opened the old inode and was
// granted it once the update let go finds it replaced and locks the new
// file, which holds the update's result.
type DataLock struct {
	f    *lockFile
	path string
	// created: LockData created the file, which Release removes again
	// if it is still that empty file (nothing was published), unless
	// the holder replaces the file itself.
	created bool
	opts    DataOptions

	mu       sync.Mutex
	released bool
}

// DataOptions say how LockData locks a data file.
type DataOptions struct {
	// Block waits until ctx ends; without it a held lock fails at once
	// with lock.ErrBusy and the holder.
	Block bool
	// Create creates a missing file empty (so that nobody can create and
	// lock it between this lock and an update's rename); without it a
	// missing file is an error matching fs.ErrNotExist.
	Create bool
	// Shared takes a shared lock instead of an exclusive one.
	Shared bool
	// HolderReplaces says the holder may replace the file itself (`hold
	// run yarn.lock` around a tool that saves yarn.lock by rename): Check
	// then never reports a replaced file as lost, and a file LockData
	// created is left in place by Release, as flock(1) leaves the file it
	// creates. Without it (an update) Check reports a file someone else
	// replaced, and Release removes a file LockData created that is still
	// empty, as nothing was published.
	HolderReplaces bool
}

// LockData takes the kernel lock of the regular file at path (symbolic
// links are not followed: resolve them first) as o says.
func LockData(ctx context.Context, path string, o DataOptions) (*DataLock, error) {
	block, create := o.Block, o.Create
	for {
		var f *lockFile
		var err error
		created := false
		if create {
			// Opened without O_CREAT first, so that we know whether the
			// file is ours to remove again.
			if f, err = openForInspect(path); errors.Is(err, fs.ErrNotExist) {
				f, created, err = createData(path)
			}
		} else {
			f, err = openForInspect(path)
		}
		if err != nil {
			return nil, err
		}
		if err = f.lock(o.Shared, false); err != nil && isBusy(err) {
			if !block {
				h := holderOf(f, false)
				f.close()
				return nil, &lock.Error{Op: "acquire", Path: path, Err: lock.ErrBusy, Holder: h, Hint: deadHolderHint(h)}
			}
			var abandoned bool
			if abandoned, err = waitLock(ctx, f, o.Shared); abandoned {
				h := holderAt(path)
				return nil, &lock.Error{Op: "acquire", Path: path, Err: lock.WaitError(err), Holder: h, Hint: deadHolderHint(h)}
			}
		}
		if err != nil {
			f.close()
			return nil, lockError(path, err)
		}
		same, err := f.namedBy(path)
		if err != nil {
			f.release()
			return nil, &lock.Error{Op: "acquire", Path: path, Err: err}
		}
		if same {
			return &DataLock{f: f, path: path, created: created, opts: o}, nil
		}
		// Replaced (or removed) while we waited: lock what the path
		// names now.
		f.release()
	}
}

// Check reports lock.ErrLost when the path no longer names the locked
// file: someone else replaced it, and publishing over it now would
// replace a file this lock does not guard. With HolderReplaces it
// reports nothing: the holder's own rename is no loss, the lock path is
// the holder's lock, and this one keeps flock(1) users of the file out
// only while the locked inode is the file, as flock(1) keeps them out of
// each other's way.
func (d *DataLock) Check() error {
	if d.opts.HolderReplaces {
		return nil
	}
	if same, err := d.f.namedBy(d.path); err == nil && !same {
		return &lock.Error{Op: "check", Path: d.path, Err: lock.ErrLost, Hint: "the file was replaced or removed by someone else while it was locked"}
	}
	return nil
}

// Path returns the path of the locked file.
func (d *DataLock) Path() string { return d.path }

// Release unlocks and closes the file; calls after the first do nothing.
func (d *DataLock) Release() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.released {
		return nil
	}
	d.released = true
	if d.created && !d.opts.HolderReplaces {
		// Created empty by LockData and still ours, empty, under our
		// lock: nothing was published, so leave nothing behind. A hold
		// locker that opened it meanwhile finds it removed once it is
		// granted the lock, and starts again.
		if same, err := d.f.namedBy(d.path); err == nil && same {
			if n, err := d.f.size(); err == nil && n == 0 {
				os.Remove(d.path)
			}
		}
	}
	uerr, cerr := d.f.release()
	if uerr != nil {
		return &lock.Error{Op: "release", Path: d.path, Err: uerr}
	}
	if cerr != nil {
		return &lock.Error{Op: "release", Path: d.path, Err: cerr}
	}
	return nil
}

// createData creates the missing file at path, empty, and opens it for
// locking; created is false when someone else created it first (it is then
// simply opened). The file is made with os.OpenFile's O_EXCL, which refuses
// a symbolic link at path too.
func createData(path string) (f *lockFile, created bool, err error) {
	nf, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if errors.Is(err, fs.ErrExist) {
		f, err = openForInspect(path)
		return f, false, err
	}
	if err != nil {
		return nil, false, &lock.Error{Op: "create", Path: path, Err: err}
	}
	defer nf.Close()
	if f, err = openForInspect(path); err != nil {
		return nil, false, err
	}
	a, aerr := nf.Stat()
	b, berr := os.Lstat(path)
	same, serr := f.namedBy(path)
	return f, aerr == nil && berr == nil && serr == nil && same && os.SameFile(a, b), nil
}
