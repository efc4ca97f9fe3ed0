package fairq

import "strings"

// QueueFileSuffix is appended to a lock path to name its queue file, the
// queue of the Linux design (see the package comment).
const QueueFileSuffix = ".queue"

// QueueOf tells whether name, a file (isDir false) or directory in the
// directory of a lock, is a fair queue, and returns the lock path it
// queues for: "<lock path>.queue" (a file) or "<lock path>.q" (a
// directory). Listing tools use it to tell queues from locks.
func QueueOf(name string, isDir bool) (lockPath string, ok bool) {
	suffix := QueueFileSuffix
	if isDir {
		suffix = QueueSuffix
	}
	lockPath, ok = strings.CutSuffix(name, suffix)
	return lockPath, ok && lockPath != ""
}
