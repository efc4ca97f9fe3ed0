//go:build unix

package dirlock

import "golang.org/x/sys/unix"

// kernelLockFree reports whether no kernel lock (flock) is held on the
// file at path: whether an exclusive one can be taken at once. It is let
// go at once.
func kernelLockFree(path string) bool {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return false
	}
	unix.Flock(fd, unix.LOCK_UN)
	return true
}
