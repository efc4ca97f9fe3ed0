package proc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// StartTime returns the start time of process pid in clock ticks after boot
// (field 22 of /proc/PID/stat), which together with the pid identifies a
// process for as long as the machine runs.
func StartTime(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may itself contain
	// spaces and parentheses: the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field 22 is f[19].
	if len(f) < 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, false
	}
	return v, true
}

// Cmdline returns the command line of process pid, arguments joined by
// spaces, or "" when it cannot be read.
func Cmdline(pid int) string {
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
// which has no owning process) is left out. Nil when nothing is found.
func LockHolders(fd uintptr) []int {
	var st unix.Stat_t
	if err := unix.Fstat(int(fd), &st); err != nil {
		return nil
	}
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil
	}
	defer f.Close()
	var pids []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF"; blocked
		// waiters appear as "1: -> FLOCK ..." and are skipped.
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || fs[1] == "->" {
			continue
		}
		if fs[1] != "FLOCK" && fs[1] != "OFDLCK" {
			continue
		}
		if !strings.EqualFold(fs[5], want) {
			continue
		}
		pid, err := strconv.Atoi(fs[4])
		if err != nil || pid <= 0 {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}
