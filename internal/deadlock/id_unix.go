//go:build unix

package deadlock

import (
	"os"
	"syscall"
)

// fileID is a file's device and inode number, which no other file shares
// while it exists.
func fileID(fi os.FileInfo) (string, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", false
	}
	return fileKeyID(uint64(st.Dev), st.Ino), true
}
