package flock

import (
	"context"
	"sync"

	"github.com/hold-dev/hold/lock"
)

// DataLock is an exclusive kernel lock on a data file, taken by whoever
// replaces the file by rename (hold's update of a file that is its own
// lock file by name, "x.lock"). It writes nothing into the file, whatever
// the file holds: the file is the user's data.
//
// Why it excludes the file's other lockers although the rename replaces
// the locked inode: it is taken, and the path checked to still name the
// locked inode, before the file is read, and it is held until after the
// rename. Every kernel locker of hold checks after its own flock(2) that
// the path still names what it locked and starts again otherwise
// (Protocol's acquire), so a locker that opened the old inode and was
// granted it once the update let go finds it replaced and locks the new
// file, which holds the update's result.
type DataLock struct {
	f    *lockFile
	path string

	mu       sync.Mutex
	released bool
}

// LockData takes the exclusive kernel lock of the regular file at path
// (symbolic links are not followed: resolve them first), waiting until ctx
// ends when block is set, and failing with lock.ErrBusy and the holder
// otherwise. A missing file is created empty when create is set (so that
// nobody can create and lock it between this lock and the update's
// rename), and is an error matching fs.ErrNotExist otherwise.
func LockData(ctx context.Context, path string, block, create bool) (*DataLock, error) {
	for {
		var f *lockFile
		var err error
		if create {
			f, _, err = openLockFile(path, openMode{readOnly: true})
		} else {
			f, err = openForInspect(path)
		}
		if err != nil {
			return nil, err
		}
		if err = f.lock(false, false); err != nil && isBusy(err) {
			if !block {
				h := holderOf(f, false)
				f.close()
				return nil, &lock.Error{Op: "acquire", Path: path, Err: lock.ErrBusy, Holder: h, Hint: deadHolderHint(h)}
			}
			var abandoned bool
			if abandoned, err = waitLock(ctx, f, false); abandoned {
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
			return &DataLock{f: f, path: path}, nil
		}
		// Replaced (or removed) while we waited: lock what the path
		// names now.
		f.release()
	}
}

// Check reports lock.ErrLost when the path no longer names the locked
// file: someone else replaced it, and publishing over it now would
// replace a file this lock does not guard.
func (d *DataLock) Check() error {
	if same, err := d.f.namedBy(d.path); err == nil && !same {
		return &lock.Error{Op: "check", Path: d.path, Err: lock.ErrLost, Hint: "the file was replaced or removed by someone else while it was locked"}
	}
	return nil
}

// Release unlocks and closes the file; calls after the first do nothing.
func (d *DataLock) Release() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.released {
		return nil
	}
	d.released = true
	uerr, cerr := d.f.release()
	if uerr != nil {
		return &lock.Error{Op: "release", Path: d.path, Err: uerr}
	}
	if cerr != nil {
		return &lock.Error{Op: "release", Path: d.path, Err: cerr}
	}
	return nil
}
