//go:build unix && !linux

package flock

// fileType returns the S_IFMT bits of the open file fd and its identity.
func fileType(fd int) (mode uint32, id fileKey, err error) { return fstatType(fd) }

// pathID returns the device and inode of path itself (not following a
// final symlink).
func pathID(path string) (fileKey, error) { return lstatID(path) }
