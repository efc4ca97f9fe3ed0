//go:build unix && !linux

package flock

import "golang.org/x/sys/unix"

// fileType returns the S_IFMT bits of the open file fd, its identity, link
// count and owner.
func fileType(fd int) (fileInfo, error) { return fstatType(fd) }

// pathID returns the device and inode of path itself (not following a
// final symlink).
func pathID(path string) (fileKey, error) { return lstatID(path) }

// kernelNamesHolders: nothing but the owner record can name a holder
// here, so it is written at once.
const kernelNamesHolders = false

// openPath is unix.Open.
func openPath(path string, flags int, perm uint32) (int, error) { return unix.Open(path, flags, perm) }
