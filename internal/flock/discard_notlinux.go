//go:build !linux

package flock

// removeIfAlone keeps the file: without Linux's leases nothing can prove
// that no other process has it open, and removing a lock file someone
// waits on would let two holders in.
func (f *lockFile) removeIfAlone() {}
