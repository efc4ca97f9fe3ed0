package flock

import (
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fileType returns the S_IFMT bits of the open file fd, its identity
// (device and inode), which Check later compares with the lock path's, and
// its link count and owner, which decide whether hold may write into it.
//
// It asks statx for those alone. A full fstat would also read the
// timestamps, and since Linux 6.13 a file whose timestamps were read gets
// fine-grained ones on its next change: the owner-record write that follows
// would then dirty the inode every time (docs/bench.md has the cost).
func fileType(fd int) (fileInfo, error) {
	var stx unix.Statx_t
	const want = unix.STATX_TYPE | unix.STATX_INO | unix.STATX_NLINK | unix.STATX_UID | unix.STATX_CTIME | unix.STATX_SIZE
	err := statxFd(fd, want, &stx)
	if err == nil && stx.Mask&want == want {
		return fileInfo{
			mode:    uint32(stx.Mode) & unix.S_IFMT,
			id:      fileKey{unix.Mkdev(stx.Dev_major, stx.Dev_minor), stx.Ino},
			links:   uint64(stx.Nlink),
			uid:     stx.Uid,
			changed: fileStamp{stx.Ctime.Sec*1e9 + int64(stx.Ctime.Nsec), int64(stx.Size)},
		}, nil
	}
	if err != nil && err != unix.ENOSYS {
		return fileInfo{}, err
	}
	return fstatType(fd)
}

// pathID returns the device and inode of path itself (not following a
// final symlink). Like fileType it asks statx for no timestamps, so that
// Check, which runs between the owner-record writes, does not make them
// dearer.
func pathID(path string) (fileKey, error) {
	var stx unix.Statx_t
	err := statxPath(path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO, &stx)
	if err == unix.ENOSYS {
		return lstatID(path)
	}
	if err != nil {
		return fileKey{}, err
	}
	return fileKey{unix.Mkdev(stx.Dev_major, stx.Dev_minor), stx.Ino}, nil
}

// kernelNamesHolders: Linux names the pids holding a flock lock in
// /proc/locks, so a holder's record may wait (see recordDelay): whoever
// looks meanwhile is told the holder's pid by the kernel.
const kernelNamesHolders = true

// statxFd is unix.Statx(fd, "", AT_EMPTY_PATH, mask, stx) without making
// the empty path's C string anew on every call (an allocation on every
// acquisition): the kernel only reads it. The pointers are converted in
// the call itself, as unsafe.Pointer's rules for system calls ask.
func statxFd(fd int, mask int, stx *unix.Statx_t) error {
	_, _, e := unix.Syscall6(unix.SYS_STATX, uintptr(fd), uintptr(unsafe.Pointer(&emptyPath[0])), unix.AT_EMPTY_PATH, uintptr(mask), uintptr(unsafe.Pointer(stx)), 0)
	if e != 0 {
		return e
	}
	return nil
}

var emptyPath = [1]byte{0}

// statxPath is unix.Statx(AT_FDCWD, path, flags, mask, stx) with the
// path's C string made on the stack, as openPath makes it.
func statxPath(path string, flags, mask int, stx *unix.Statx_t) error {
	var buf [pathBufSize]byte
	if len(path) >= len(buf) || strings.IndexByte(path, 0) >= 0 {
		return unix.Statx(unix.AT_FDCWD, path, flags, mask, stx)
	}
	copy(buf[:], path)
	dirfd := unix.AT_FDCWD
	_, _, e := unix.Syscall6(unix.SYS_STATX, uintptr(dirfd), uintptr(unsafe.Pointer(&buf[0])), uintptr(flags), uintptr(mask), uintptr(unsafe.Pointer(stx)), 0)
	if e != 0 {
		return e
	}
	return nil
}

// pathBufSize bounds the lock paths openPath hands the kernel from the
// stack; longer ones are converted by unix.Open.
const pathBufSize = 256

// openPath is unix.Open(path, flags, perm) with the path's C string made
// on the stack rather than on the heap (an allocation on every
// acquisition). The goroutine's stack does not move while it is in the
// system call, and the pointer is converted in the call itself, as
// unsafe.Pointer's rules for system calls ask.
func openPath(path string, flags int, perm uint32) (int, error) {
	var buf [pathBufSize]byte
	if len(path) >= len(buf) || strings.IndexByte(path, 0) >= 0 {
		return unix.Open(path, flags, perm)
	}
	copy(buf[:], path)     // what follows the path is already a NUL
	dirfd := unix.AT_FDCWD // (a variable: the constant is negative)
	fd, _, e := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&buf[0])), uintptr(flags|unix.O_LARGEFILE), uintptr(perm), 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}
