//go:build !linux

package proc

// StartTime is not implemented outside Linux: the pid alone is used.
func StartTime(pid int) (uint64, bool) { return 0, false }

// Cmdline is not implemented outside Linux.
func Cmdline(pid int) string { return "" }

// LockHolders is not implemented outside Linux: there is no /proc/locks.
func LockHolders(fd uintptr) []int { return nil }

// pidNamespace: pid namespaces are Linux's; elsewhere the host name alone
// places a pid.
func pidNamespace() uint64 { return 0 }

// bootID is not known outside Linux.
func bootID() string { return "" }

// OFDLockOwner is Linux's: elsewhere the owner of an OFD lock is not found.
func OFDLockOwner(path string, off int64) (pid int, ok bool) { return 0, false }

// Stopped is not known outside Linux.
func Stopped(pid int) bool { return false }

// ShareLockTable has no table to share outside Linux.
func ShareLockTable() (release func()) { return func() {} }
