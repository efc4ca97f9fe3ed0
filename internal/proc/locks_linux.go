package proc

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
)

// KernelLock is one line of /proc/locks: a lock the kernel holds for a
// process, or a process blocked waiting for one.
type KernelLock struct {
	// Kind is "FLOCK" (flock(2)), "POSIX" (fcntl), "OFDLCK" (open file
	// description locks) or "LEASE".
	Kind string
	// Write: an exclusive (WRITE) lock, else a shared (READ) one.
	Write bool
	// Blocked: the process waits for this lock (a "->" line) and does
	// not hold it.
	Blocked bool
	// PID is the process that took the lock or waits for it; -1 for an
	// OFD lock, which belongs to no process.
	PID int
	// Major, Minor and Inode identify the locked file.
	Major, Minor uint32
	Inode        uint64
}

// KernelLocks reads the kernel's lock table, /proc/locks, the way
// lslocks(8) does. The table lists every lock on the machine, so a caller
// looking at many files should read it once.
func KernelLocks() ([]KernelLock, error) {
	f, err := os.Open("/proc/locks")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return parseKernelLocks(f), nil
}

// parseKernelLocks parses the text of /proc/locks, skipping what it does
// not understand. A line reads "1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234
// 0 EOF"; a blocked waiter's reads "1: -> FLOCK  ADVISORY  WRITE ...".
func parseKernelLocks(r io.Reader) []KernelLock {
	var locks []KernelLock
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		var l KernelLock
		if len(fs) > 1 && fs[1] == "->" {
			l.Blocked = true
			fs = fs[1:]
		}
		if len(fs) < 6 {
			continue
		}
		l.Kind, l.Write = fs[1], fs[3] == "WRITE"
		pid, err := strconv.Atoi(fs[4])
		if err != nil {
			continue
		}
		l.PID = pid
		id := strings.Split(fs[5], ":")
		if len(id) != 3 {
			continue
		}
		major, err1 := strconv.ParseUint(id[0], 16, 32)
		minor, err2 := strconv.ParseUint(id[1], 16, 32)
		ino, err3 := strconv.ParseUint(id[2], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		l.Major, l.Minor, l.Inode = uint32(major), uint32(minor), ino
		locks = append(locks, l)
	}
	return locks
}
