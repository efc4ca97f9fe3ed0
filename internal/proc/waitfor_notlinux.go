//go:build !linux

package proc

// FileKey identifies a file by its device and inode number.
type FileKey struct{ Dev, Ino uint64 }

// SoleChildWaiter cannot be told outside Linux: never ok.
func SoleChildWaiter(pid int) (child int, ok bool) { return 0, false }

// Threads is unknown outside Linux: 0.
func Threads(pid int) int { return 0 }

// FlockKeepers cannot be found outside Linux: none.
func FlockKeepers(k FileKey) (pids, unknown []int) { return nil, nil }

// DescendsFrom cannot be told outside Linux: false.
func DescendsFrom(pid int, roots []int) bool { return false }

// FileKeyOf is not needed outside Linux, where FlockKeepers finds nothing.
func FileKeyOf(path string) (FileKey, bool) { return FileKey{}, false }

// HeldExclusive cannot be told outside Linux: false.
func HeldExclusive(k FileKey) bool { return false }

// Keeps cannot be told outside Linux: false.
func Keeps(pid int, k FileKey) bool { return false }

// LockKeepers is LockHolders outside Linux: nil.
func LockKeepers(fd uintptr) []int { return LockHolders(fd) }

// KeepsFile cannot be told outside Linux: true (see the Linux one).
func KeepsFile(pid int, fd uintptr) bool { return true }

// KernelHolders cannot be read outside Linux: nil.
func KernelHolders(k FileKey) []int { return nil }

// WaitingAncestors cannot be told outside Linux: none.
func WaitingAncestors(pid int) []int { return nil }

// CaughtSignals cannot be read outside Linux: never ok.
func CaughtSignals(pid int) (set uint64, ok bool) { return 0, false }

// OwnKeeps cannot be told outside Linux: none.
func OwnKeeps(k FileKey, writers bool) []int { return nil }
