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

// renameNoReplace moves from to to unless to exists. macOS refuses an
// existing name in the rename itself (renameExclusive); elsewhere the check
// and the rename are two steps, so a directory made at to between them
// (another tool's empty lock directory; rename(2) replaces an empty
// directory) would be replaced. docs/portable.md says so.
func renameNoReplace(from, to string) error {
	if ok, err := renameExclusive(from, to); ok {
		return err
	}
	if _, err := os.Lstat(to); err == nil {
		return os.ErrExist
	}
	return os.Rename(from, to)
}

// yieldCPU: the yield is made on Linux only (sys_linux.go), where it was measured.
func yieldCPU() {}
