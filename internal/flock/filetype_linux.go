package flock

import "golang.org/x/sys/unix"

// fileType returns the S_IFMT bits of the open file fd.
//
// It asks statx for the type alone. A full fstat would also read the
// timestamps, and since Linux 6.13 a file whose timestamps were read gets
// fine-grained ones on its next change: the owner-record write that follows
// then has to dirty the inode every time. Measured here (ext4, kernel
// 6.18): fstat+pwrite 2.9 µs, statx(STATX_TYPE)+pwrite 1.8 µs, pwrite
// alone 1.2 µs.
func fileType(fd int) (uint32, error) {
	var stx unix.Statx_t
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_TYPE, &stx)
	if err == nil && stx.Mask&unix.STATX_TYPE != 0 {
		return uint32(stx.Mode) & unix.S_IFMT, nil
	}
	if err != nil && err != unix.ENOSYS {
		return 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return uint32(st.Mode) & unix.S_IFMT, nil
}

// fileID returns the device and inode of the open file fd, or, when path
// is not empty, of path itself (not following a final symlink). Like
// fileType it asks statx for no timestamps, so that Check, which runs
// between the owner-record writes, does not make them dearer.
func fileID(fd int, path string) (dev, ino uint64, err error) {
	var stx unix.Statx_t
	if path == "" {
		err = unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_INO, &stx)
	} else {
		err = unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO, &stx)
	}
	if err == unix.ENOSYS {
		return statID(fd, path)
	}
	if err != nil {
		return 0, 0, err
	}
	return unix.Mkdev(stx.Dev_major, stx.Dev_minor), stx.Ino, nil
}
