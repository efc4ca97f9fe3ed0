//go:build unix && !linux

package dirlock

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

func touchFd(fd int, t time.Time) error {
	tv := unix.NsecToTimeval(t.UnixNano())
	return unix.Futimes(fd, []unix.Timeval{tv, tv})
}

// renameNoReplace moves from to to unless to exists. Outside Linux the
// check and the rename are two steps; the window only matters when putting
// back a lock a reclaim moved by mistake.
func renameNoReplace(from, to string) error {
	if _, err := os.Lstat(to); err == nil {
		return os.ErrExist
	}
	return os.Rename(from, to)
}

// yieldCPU: the yield is made on Linux only (sys_linux.go), where it was measured.
func yieldCPU() {}
