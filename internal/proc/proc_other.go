//go:build !linux

package proc

// StartTime is not implemented outside Linux: the pid alone is used.
func StartTime(pid int) (uint64, bool) { return 0, false }

// Cmdline is not implemented outside Linux.
func Cmdline(pid int) string { return "" }

// LockHolders is not implemented outside Linux: there is no /proc/locks.
func LockHolders(fd uintptr) []int { return nil }
