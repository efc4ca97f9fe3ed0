package dirlock

import (
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// touchFd sets the mtime (and atime) of the open file fd: utimensat with a
// NULL path acts on the descriptor itself (what glibc's futimens does),
// without going through /proc.
func touchFd(fd int, t time.Time) error {
	ts := [2]unix.Timespec{unix.NsecToTimespec(t.UnixNano()), unix.NsecToTimespec(t.UnixNano())}
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// renameNoReplace moves from to to only if to does not exist, so putting a
// lock back never clobbers one created at the path meanwhile (rename(2)
// replaces an empty directory).
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	if err == unix.ENOSYS || err == unix.EINVAL {
		if _, serr := os.Lstat(to); serr == nil {
			return os.ErrExist
		}
		return os.Rename(from, to)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}

// yieldCPU gives the CPU to another runnable task, if there is one, before
// a release cleans up after itself. The lock path is free by then, and the
// waiter it woke is, on a busy machine, often queued on this very CPU
// behind the releaser, which still has its tomb to delete and its next
// acquisition to start (docs/portable.md#cost has the gain).
// sched_yield(2) returns at once when nothing else is runnable.
func yieldCPU() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
