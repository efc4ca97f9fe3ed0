package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"github.com/hold-dev/hold/lock"
)

// Ancestors returns this process's ancestors, nearest first, each with its
// arguments, from /proc (up to, not including, pid 1). Nil when /proc
// cannot be read.
func Ancestors() []Process {
	var out []Process
	pid := os.Getppid()
	for range 64 { // a bound against a loop, should /proc be odd
		if pid <= 1 {
			break
		}
		out = append(out, Process{PID: pid, Args: args(pid)})
		next, ok := parentOf(pid)
		if !ok {
			break
		}
		pid = next
	}
	return out
}

// Process is a process and its arguments (nil when unreadable).
type Process struct {
	PID  int
	Args []string
}

func args(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return nil
	}
	return toStrings(bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}))
}

func toStrings(bs [][]byte) []string {
	s := make([]string, len(bs))
	for i, b := range bs {
		s[i] = string(b)
	}
	return s
}

// parentOf returns the parent of pid: field 4 of /proc/PID/stat, the first
// after the state that follows the command name's last ')'.
func parentOf(pid int) (int, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(string(f[1]))
	return ppid, err == nil
}

// Parent returns a record describing this process's parent (PID, Host,
// ProcStart, Command masked as Self's is), as Self describes this one:
// for a lock that the parent keeps, such as the descriptor a shell lends
// `hold run -n 9`. ok is false when the parent cannot be read.
func Parent() (o lock.Owner, ok bool) {
	pid := os.Getppid()
	start, ok := StartTime(pid)
	if pid <= 1 || !ok {
		return lock.Owner{}, false
	}
	o = lock.Owner{PID: pid, Host: Hostname(), ProcStart: start}
	if a := args(pid); a != nil && RecordCommand() {
		o.Command = MaskSecrets(a)
	}
	// The parent must still be the one that started this process.
	if os.Getppid() != pid {
		return lock.Owner{}, false
	}
	return o, true
}

// Args returns the arguments of process pid, nil when unreadable.
func Args(pid int) []string { return args(pid) }
