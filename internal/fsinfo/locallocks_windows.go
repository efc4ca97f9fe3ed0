package fsinfo

// LocalLocksAt returns why kernel locks taken at path may not be seen by
// other machines, or "" when they are. On Windows LockFileEx on a network
// share is decided by the file server for every client, so the answer is
// always "" and nothing is looked up (fs is empty).
func LocalLocksAt(path string) (fs Filesystem, reason string, err error) {
	return Filesystem{}, "", nil
}
