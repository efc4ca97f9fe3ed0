package report

import (
	"slices"

	"github.com/hold-dev/hold/internal/proc"
)

// openersOf lists the processes that have the file at path open, found the
// way lsof does: by matching device and inode under /proc/PID/fd. The
// kernel's lock table names only the process that took a flock, which may
// be dead while a child that inherited the descriptor holds the lock on;
// this finds the child. Processes whose descriptors we may not read are
// missed. Within proc.ShareLockTable (a listing), every process's
// descriptors are read once for all the locks listed, not once per lock.
func openersOf(path string) []Opener {
	k, ok := proc.FileKeyOf(path)
	if !ok {
		return nil
	}
	pids := proc.Openers(k)
	slices.Sort(pids)
	found := make([]Opener, 0, len(pids))
	for _, pid := range pids {
		found = append(found, Opener{PID: pid, Command: proc.Cmdline(pid)})
	}
	if len(found) == 0 {
		return nil
	}
	return found
}
