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

// gateQueue is the path of the gate's queue: one file on Linux.
func gateQueue(path string) string { return path + GateSuffix + ".queue" }

// blockGate makes the gate of path unusable by putting a directory where
// its queue file goes, and returns what it put there.
func blockGate(t *testing.T, path string) os.FileInfo {
	t.Helper()
	if err := os.Mkdir(gateQueue(path), 0o777); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(gateQueue(path))
	if err != nil {
		t.Fatal(err)
	}
	return fi
}
