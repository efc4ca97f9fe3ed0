//go:build !linux

package proc

import "github.com/hold-dev/hold/lock"

// Process is a process and its arguments (nil when unreadable).
type Process struct {
	PID  int
	Args []string
}

// Ancestors is not implemented outside Linux: nil.
func Ancestors() []Process { return nil }

// Parent cannot be read outside Linux: not ok.
func Parent() (lock.Owner, bool) { return lock.Owner{}, false }

// Args cannot be read outside Linux: nil.
func Args(pid int) []string { return nil }
