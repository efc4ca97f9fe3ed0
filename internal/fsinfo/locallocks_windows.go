package fsinfo

import "os"

// LocalLocksOf returns why kernel locks taken on the open file f may not be
// seen by other machines, or "" when they are. On Windows LockFileEx on a
// network share is decided by the file server for every client, so the
// answer is always "" and nothing is looked up (fs is empty).
func LocalLocksOf(f *os.File) (fs Filesystem, reason string, err error) {
	return Filesystem{}, "", nil
}
