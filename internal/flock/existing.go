package flock

import (
	"errors"
	"os"

	"github.com/hold-dev/hold/lock"
)

// Another protocol that shares a lock path with this one (the portable
// protocol, which takes over a lock file a kernel holder left behind)
// must never remove a file while a kernel lock is held on it: its holder
// writes its record once and never refreshes anything, so nothing but
// the kernel can say it is there. And it must remove it while holding
// that lock itself: a process of this protocol that opened the file a
// moment earlier then gets the lock only once the file is gone, finds it
// replaced (see take) and starts over on what the path holds now.
// LockExisting takes that lock the way this protocol takes its own.

// Existing is this protocol's kernel lock, exclusive, taken on a lock
// file that already exists, by a caller that means to remove the file
// while it holds the lock (see LockExisting).
type Existing struct{ f *lockFile }

// LockExisting takes the kernel lock on the existing lock file at path,
// exclusively and without waiting, as this protocol takes it, opening the
// file for reading only and creating nothing. A file that is locked
// (exclusively or shared, by hold or by any other flock user) is an error
// matching lock.ErrBusy whose Holder names the kernel's holders; a
// missing file one matching fs.ErrNotExist.
func LockExisting(path string) (*Existing, error) {
	f, err := openForInspect(path)
	if err != nil {
		return nil, err
	}
	if err := f.lock(false, false); err != nil {
		if isBusy(err) {
			h := holderOf(f, true)
			f.close()
			return nil, &lock.Error{Op: "acquire", Path: path, Err: lock.ErrBusy, Holder: h}
		}
		f.close()
		return nil, lockError(path, err)
	}
	return &Existing{f: f}, nil
}

// Is reports whether the locked file is the one judged (fi, an Lstat of
// path taken earlier) and path still names it: only then may the caller
// act on the path in the lock's name.
func (e *Existing) Is(path string, judged os.FileInfo) bool {
	if !e.f.isFile(judged) {
		return false
	}
	same, err := e.f.namedBy(path)
	return err == nil && same
}

// Release lets the lock go and closes the file.
func (e *Existing) Release() { e.f.release() }

// KernelHolder reports whether a kernel lock is held on the existing lock
// file at path, and by whom (the record in the file and the kernel's
// lock table, where it names holders): nil when none is. It asks by
// taking the lock without waiting and letting it go at once. A missing
// file is an error matching fs.ErrNotExist; one that cannot be opened or
// locked (for want of descriptors, say) is the error that says why.
func KernelHolder(path string) (*lock.Holder, error) {
	e, err := LockExisting(path)
	if err == nil {
		e.Release()
		return nil, nil
	}
	var le *lock.Error
	if errors.As(err, &le) && errors.Is(err, lock.ErrBusy) {
		if le.Holder == nil {
			le.Holder = &lock.Holder{}
		}
		return le.Holder, nil
	}
	return nil, err
}
