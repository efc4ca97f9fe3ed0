package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/internal/lockpath"
	"github.com/hold-dev/hold/internal/proc"
)

// fileKey identifies a file as the kernel's lock table does.
type fileKey struct{ dev, ino uint64 }

// kernelTable holds the flock(2) locks of the kernel's lock table, by file:
// hold's kernel locks and those of the tools it interoperates with.
type kernelTable map[fileKey]kernelUse

// kernelUse is what the kernel's lock table says about one file.
type kernelUse struct {
	// holders are the pids holding a flock on the file (the process that
	// took it; a child that inherited the descriptor is not listed).
	holders []int
	// blocked counts the processes blocked waiting for it.
	blocked int
}

// locked reports a file someone holds or waits for.
func (u kernelUse) locked() bool { return len(u.holders) > 0 || u.blocked > 0 }

// readKernelTable reads /proc/locks once; a table that cannot be read is
// empty (every lock then shows no kernel waiters).
func readKernelTable() kernelTable {
	locks, err := proc.KernelLocks()
	if err != nil {
		return nil
	}
	t := kernelTable{}
	for _, l := range locks {
		if l.Kind != "FLOCK" {
			continue
		}
		k := fileKey{unix.Mkdev(l.Major, l.Minor), l.Inode}
		u := t[k]
		if l.Blocked {
			u.blocked++
		} else {
			u.holders = append(u.holders, l.PID)
		}
		t[k] = u
	}
	return t
}

// use looks up the file fi describes.
func (t kernelTable) use(fi fs.FileInfo) kernelUse {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || t == nil {
		return kernelUse{}
	}
	return t[fileKey{uint64(st.Dev), st.Ino}]
}

// listHeldEverywhere lists every hold lock file the kernel says is locked,
// wherever it lives: the files of the table's flocks are found among the
// open descriptors of their holders (/proc/PID/fd), and of every process
// for a lock whose taker has gone (its descriptor lives on in a child).
// Only processes whose descriptors we may read are searched.
func (l *lister) listHeldEverywhere() error {
	want := map[fileKey]bool{}
	for k, u := range l.kernel {
		if len(u.holders) > 0 {
			want[k] = true
		}
	}
	found := map[fileKey]string{}
	var pids []int
	for k := range want {
		pids = append(pids, l.kernel[k].holders...)
	}
	slices.Sort(pids)
	findOpenFiles(slices.Compact(pids), want, found)
	if len(found) < len(want) {
		findOpenFiles(allPIDs(), want, found)
	}
	paths := make([]string, 0, len(found))
	for _, p := range found {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, path := range slices.Compact(paths) {
		fi, err := os.Lstat(path)
		if err != nil || !fi.Mode().IsRegular() || !lockpath.IsLockName(filepath.Base(path)) {
			continue
		}
		// The kernel lock alone does not make a file hold's here: flock
		// is used on many files. It must look like a hold lock file.
		if fi.Size() > 0 {
			if ours, err := holdsRecord(path); err != nil || !ours {
				continue
			}
		}
		if err := l.listLock(path, fs.FileInfoToDirEntry(fi), sideFilesOf(path)); err != nil {
			l.report(err)
		}
	}
	return nil
}

// findOpenFiles looks through the descriptors of pids for the files in
// want that found lacks, and records their paths in found.
func findOpenFiles(pids []int, want map[fileKey]bool, found map[fileKey]string) {
	for _, pid := range pids {
		if len(found) == len(want) {
			return
		}
		fdDir := "/proc/" + strconv.Itoa(pid) + "/fd"
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			link := filepath.Join(fdDir, fd.Name())
			var st unix.Stat_t
			if unix.Stat(link, &st) != nil {
				continue
			}
			k := fileKey{uint64(st.Dev), st.Ino}
			if !want[k] || found[k] != "" {
				continue
			}
			// A file removed since it was opened reads "PATH (deleted)"
			// and is not at PATH any more: the stat of PATH in the
			// caller tells.
			if path, err := os.Readlink(link); err == nil && filepath.IsAbs(path) {
				if pst, err := os.Stat(path); err == nil {
					if s, ok := pst.Sys().(*syscall.Stat_t); ok && uint64(s.Dev) == k.dev && s.Ino == k.ino {
						found[k] = path
					}
				}
			}
		}
	}
}

// allPIDs lists the processes in /proc.
func allPIDs() []int {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, d := range dirs {
		if pid, err := strconv.Atoi(d.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
