package hold_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// kernelLocks reads /proc/locks for the lock file at path: the pids that
// hold a flock(2) lock on it and the pids blocked waiting for one. The
// tests use it to know for certain that a waiter is already asleep in the
// kernel, and that nobody (an abandoned wait, say) still holds a lock.
func kernelLocks(path string) (holders, waiters []int, ok bool) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, nil, false
	}
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil, nil, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		fs := strings.Fields(line)
		blocked := len(fs) > 1 && fs[1] == "->"
		if blocked {
			fs = append(fs[:1], fs[2:]...)
		}
		if len(fs) < 6 || fs[1] != "FLOCK" || !strings.EqualFold(fs[5], want) {
			continue
		}
		pid, _ := strconv.Atoi(fs[4])
		if blocked {
			waiters = append(waiters, pid)
		} else {
			holders = append(holders, pid)
		}
	}
	return holders, waiters, true
}
