package report

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/internal/proc"
)

// openersOf lists the processes that have the file at path open, found the
// way lsof does: by matching device and inode under /proc/PID/fd. The
// kernel's lock table names only the process that took a flock, which may
// be dead while a child that inherited the descriptor holds the lock on;
// this finds the child. Processes whose descriptors we may not read are
// missed.
func openersOf(path string) []Opener {
	var want unix.Stat_t
	if err := unix.Stat(path, &want); err != nil {
		return nil
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var found []Opener
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == self {
			continue
		}
		fdDir := filepath.Join("/proc", d.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			var st unix.Stat_t
			if unix.Stat(filepath.Join(fdDir, fd.Name()), &st) == nil && st.Dev == want.Dev && st.Ino == want.Ino {
				found = append(found, Opener{PID: pid, Command: proc.Cmdline(pid)})
				break
			}
		}
	}
	slices.SortFunc(found, func(a, b Opener) int { return a.PID - b.PID })
	return found
}
