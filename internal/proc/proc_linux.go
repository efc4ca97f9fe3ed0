package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// StartTime returns the start time of process pid in clock ticks after boot
// (field 22 of /proc/PID/stat), which together with the pid identifies a
// process for as long as the machine runs. It reads into a buffer on the
// stack: naming a lock's holder asks it on every busy TryAcquire.
func StartTime(pid int) (uint64, bool) {
	var path [32]byte
	p := append(append(path[:0], "/proc/"...), strconv.Itoa(pid)...)
	p = append(p, "/stat"...)
	fd, err := unix.Open(string(p), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	// The line is a few hundred bytes; the command name in it is at most
	// 64 (TASK_COMM_LEN 16 today), so 1 KiB holds field 22 comfortably.
	var buf [1024]byte
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil || m == 0 {
			break
		}
		n += m
	}
	return parseStartTime(buf[:n])
}

// parseStartTime finds field 22 in the text of /proc/PID/stat. The command
// name (field 2) is in parentheses and may itself contain spaces and
// parentheses: the fields that follow start after the last ')'.
func parseStartTime(b []byte) (uint64, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	b = b[i+1:]
	// Field 3 (state) is the first after ')', so field 22 is the 20th.
	for field := 1; ; field++ {
		for len(b) > 0 && b[0] == ' ' {
			b = b[1:]
		}
		end := bytes.IndexByte(b, ' ')
		if end < 0 {
			end = len(b)
		}
		if end == 0 {
			return 0, false
		}
		if field == 20 {
			v, err := strconv.ParseUint(string(bytes.TrimSpace(b[:end])), 10, 64)
			return v, err == nil
		}
		b = b[end:]
	}
}

// Cmdline returns the command line of process pid, arguments joined by
// spaces, or "" when it cannot be read. While a lock table is shared
// (ShareLockTable) each process's is read once.
func Cmdline(pid int) string {
	if c, ok := sharedCmdline(pid); ok {
		return c
	}
	c := readCmdline(pid)
	keepCmdline(pid, c)
	return c
}

func readCmdline(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	b = bytes.TrimRight(b, "\x00")
	return string(bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
}

// LockHolders returns the pids that /proc/locks lists as holding a FLOCK or
// OFDLCK lock on the file open as fd, the way lslocks(8) finds them. It is
// how hold names a holder that is not hold (flock(1), Python's filelock) or
// that inherited the descriptor from a dead parent. A pid of -1 (an OFD lock,
// which has no owning process) is left out, and so are blocked waiters. Nil
// when nothing is found. Within ShareLockTable it answers from the shared
// reading of the table.
func LockHolders(fd uintptr) []int {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd), &st); err != nil {
		return nil
	}
	t, err := SharedLockTable()
	if err != nil {
		return nil
	}
	return t.Holders(FileKey{uint64(st.Dev), st.Ino})
}

// pidNamespace returns the inode number of this process's pid namespace,
// which names it among the namespaces of this boot; 0 when unknown.
func pidNamespace() uint64 {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/pid", &st); err != nil {
		return 0
	}
	return st.Ino
}

// bootID returns the kernel's random identifier of this boot, "" when
// unknown.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}
