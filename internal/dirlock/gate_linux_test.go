package dirlock

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// blockedOn counts the lock requests the kernel lists as blocked on the
// file at path (/proc/locks marks them "->"): 0 when there is no such
// file, -1 when the kernel cannot be asked.
func blockedOn(t *testing.T, path string) int {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	ino := strconv.FormatUint(fi.Sys().(*syscall.Stat_t).Ino, 10)
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return -1
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[1] != "->" {
			continue
		}
		// "N: -> FLOCK ADVISORY WRITE pid maj:min:ino start end"
		if strings.HasSuffix(f[6], ":"+ino) {
			n++
		}
	}
	return n
}
