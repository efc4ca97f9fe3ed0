package flock

import "golang.org/x/sys/unix"

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
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, want, &stx)
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
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO, &stx)
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
