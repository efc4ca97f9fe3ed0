//go:build !linux && !windows

package fsinfo

import "os"

// LocalLocksOf identifies the filesystem holding the open file f (a lock
// file) and returns, with it, why kernel locks taken there may not be seen
// by other machines, or "" when they are (see Filesystem.LocalLocks).
// Here that is one statfs(2) of f's path, whose type name says whether it
// is FUSE.
func LocalLocksOf(f *os.File) (fs Filesystem, reason string, err error) {
	fs, err = Stat(f.Name())
	if err != nil {
		return Filesystem{}, "", err
	}
	return fs, fs.LocalLocks(), nil
}
