//go:build !linux

package proc

// Process is a process and its arguments (nil when unreadable).
type Process struct {
	PID  int
	Args []string
}

// Ancestors is not implemented outside Linux: nil.
func Ancestors() []Process { return nil }
