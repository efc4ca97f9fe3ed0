//go:build unix && !linux

package flock

import "golang.org/x/sys/unix"

// fileType returns the S_IFMT bits of the open file fd.
func fileType(fd int) (uint32, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	return uint32(st.Mode) & unix.S_IFMT, nil
}

// fileID returns the device and inode of the open file fd, or, when path
// is not empty, of path itself (not following a final symlink).
func fileID(fd int, path string) (dev, ino uint64, err error) { return statID(fd, path) }
