package proc

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// OFDLockOwner returns the process that holds an open file description
// (OFD) write lock starting at byte off of the file at path, as far as
// this process may look (its own processes; all of them as root). The
// kernel names no process for an OFD lock (F_OFD_GETLK and /proc/locks
// say -1), so it is found the long way: the processes that have the file
// open, and the locks each descriptor's fdinfo lists. That reads every
// process's descriptor table; it is meant for rare questions (which fair
// waiter is stuck), never for a lock's hot path.
func OFDLockOwner(path string, off int64) (pid int, ok bool) {
	var want unix.Stat_t
	if err := unix.Stat(path, &want); err != nil {
		return 0, false
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid <= 0 {
			continue
		}
		dir := "/proc/" + p.Name()
		fds, err := os.ReadDir(dir + "/fd")
		if err != nil {
			continue
		}
		for _, fd := range fds {
			var st unix.Stat_t
			if unix.Stat(dir+"/fd/"+fd.Name(), &st) != nil || st.Dev != want.Dev || st.Ino != want.Ino {
				continue
			}
			if holdsOFDWrite(dir+"/fdinfo/"+fd.Name(), off) {
				return pid, true
			}
		}
	}
	return 0, false
}

// holdsOFDWrite reports whether the fdinfo file at path lists an OFD
// write lock that starts at off ("lock:\t1: OFDLCK ADVISORY  WRITE -1
// fe:00:1234 1048577 1048577").
func holdsOFDWrite(path string, off int64) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "lock:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) >= 8 && f[1] == "OFDLCK" && f[3] == "WRITE" && f[6] == strconv.FormatInt(off, 10) {
			return true
		}
	}
	return false
}

// Stopped reports whether process pid is stopped (SIGSTOP, Ctrl-Z's
// SIGTSTP, a debugger): state T or t in /proc/PID/stat.
func Stopped(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	return b[i+2] == 'T' || b[i+2] == 't'
}
