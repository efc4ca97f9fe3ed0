package flock

import (
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// removeIfAlone removes the lock file that this open created, while the
// lock is held, when no other process has it open: a command that was
// refused leaves nothing it created behind. Removing a lock file is safe
// only if nobody can end up locking the removed file while a newcomer
// locks a new one at the path, so every step makes sure of that, and any
// doubt keeps the file:
//
//   - A write lease (F_SETLEASE) is granted only while no other
//     descriptor has the file open, anywhere: nobody waits on it, nobody
//     is about to lock it.
//   - The file is renamed aside rather than removed. An open(2) that
//     found the file just before the rename now blocks on the lease, and
//     the kernel marks the lease as breaking (F_GETLEASE no longer says
//     F_WRLCK); one after the rename finds no file at the path.
//   - No break: nobody will get the old file; it is removed. A break:
//     the file is renamed back and stays, as if nothing had been tried;
//     if the path was taken meanwhile, the side file is removed.
//
// Any process opening the file during these few system calls is made to
// wait by the lease until the lease is dropped, which is after the file
// is either gone or back: hold's own opens, which are non-blocking, fail
// with EAGAIN and open the path again a moment later (openRetry), so they
// find what the path names then. What is left is a double coincidence for
// tools whose open blocks (flock(1)): an open that found the file in the
// instant before the rename, and another process creating a new file at
// the path in the two system calls before the rename back; the first then
// locks the old, unlinked file beside the second. It takes a lock file
// that this very command created moments ago and is giving up.
func (f *lockFile) removeIfAlone() {
	if !f.created {
		return
	}
	fd := f.sysfd()
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_WRLCK); err != nil {
		return
	}
	defer unix.FcntlInt(uintptr(fd), unix.F_SETLEASE, unix.F_UNLCK)
	discardStep("leased", fd)
	aside := filepath.Join(filepath.Dir(f.path), "."+filepath.Base(f.path)+".hold-discard-"+strconv.Itoa(os.Getpid()))
	if unix.Renameat2(unix.AT_FDCWD, f.path, unix.AT_FDCWD, aside, unix.RENAME_NOREPLACE) != nil {
		return
	}
	discardStep("moved", fd)
	if t, err := unix.FcntlInt(uintptr(fd), unix.F_GETLEASE, 0); err == nil && t == unix.F_WRLCK {
		unix.Unlink(aside)
		return
	}
	if unix.Renameat2(unix.AT_FDCWD, aside, unix.AT_FDCWD, f.path, unix.RENAME_NOREPLACE) != nil {
		// The path was taken meanwhile: a newcomer made a lock file of
		// its own there. The side file is nobody's lock any more (an
		// opener that got it in the instant before the rename finds it
		// replaced once it locks it, and starts over), so it goes.
		unix.Unlink(aside)
	}
}

// discardHook, when set (by tests only), is called at each step of
// removeIfAlone with the lease's descriptor.
var discardHook func(step string, fd int)

func discardStep(step string, fd int) {
	if discardHook != nil {
		discardHook(step, fd)
	}
}
