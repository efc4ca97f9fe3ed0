//go:build !linux && !windows

package fsinfo

// LocalLocksAt identifies the filesystem holding path (a directory, or a
// file in it) and returns, with it, why kernel locks taken there may not be
// seen by other machines, or "" when they are (see Filesystem.LocalLocks).
// Here that is one statfs(2), whose type name says whether it is FUSE.
func LocalLocksAt(path string) (fs Filesystem, reason string, err error) {
	fs, err = Stat(path)
	if err != nil {
		return Filesystem{}, "", err
	}
	return fs, fs.LocalLocks(), nil
}
