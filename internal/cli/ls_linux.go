package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/internal/lockpath"
	"github.com/hold-dev/hold/internal/proc"
)

// kernelTable is the kernel's lock table as ls sees it: the flock(2) locks,
// hold's kernel locks and those of the tools it interoperates with. It is
// read at the first question, once per call and shared with the holder
// lookups of Inspect (proc.ShareLockTable), so a listing that meets no
// locked file does not read it at all: it lists every lock on the machine.
type kernelTable struct {
	once sync.Once
	t    *proc.LockTable // nil: unreadable (every lock then shows no kernel waiters)
}

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

// table reads the table at the first call.
func (k *kernelTable) table() *proc.LockTable {
	k.once.Do(func() { k.t, _ = proc.SharedLockTable() })
	return k.t
}

// useOf sums up the table's lines for one file.
func useOf(locks []proc.KernelLock) kernelUse {
	var u kernelUse
	for _, l := range locks {
		switch {
		case l.Kind != "FLOCK":
		case l.Blocked:
			u.blocked++
		default:
			u.holders = append(u.holders, l.PID)
		}
	}
	return u
}

// use looks up the file fi describes.
func (k *kernelTable) use(fi fs.FileInfo) kernelUse {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return kernelUse{}
	}
	return useOf(k.table().Locks(proc.FileKey{Dev: uint64(st.Dev), Ino: st.Ino}))
}

// listHeldEverywhere lists every hold lock file the kernel says is locked,
// wherever it lives: the files of the table's flocks are found among the
// open descriptors of their holders (/proc/PID/fd), and of every process
// for a lock whose taker has gone (its descriptor lives on in a child).
// Only processes whose descriptors we may read are searched.
func (l *lister) listHeldEverywhere() error {
	want := map[proc.FileKey]bool{}
	var pids []int
	for k, locks := range l.kernel.table().Files() {
		if u := useOf(locks); len(u.holders) > 0 {
			want[k] = true
			pids = append(pids, u.holders...)
		}
	}
	found := map[proc.FileKey]string{}
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
	paths = slices.Compact(paths)
	for _, path := range paths {
		if _, found := slices.BinarySearch(paths, path+lockpath.Suffix); found {
			// yarn.lock held with its companion yarn.lock.lock: one
			// line, the companion's (see walk).
			continue
		}
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
func findOpenFiles(pids []int, want map[proc.FileKey]bool, found map[proc.FileKey]string) {
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
			k := proc.FileKey{Dev: uint64(st.Dev), Ino: st.Ino}
			if !want[k] || found[k] != "" {
				continue
			}
			// A file removed since it was opened reads "PATH (deleted)"
			// and is not at PATH any more: the stat of PATH in the
			// caller tells.
			if path, err := os.Readlink(link); err == nil && filepath.IsAbs(path) {
				if pst, err := os.Stat(path); err == nil {
					if s, ok := pst.Sys().(*syscall.Stat_t); ok && uint64(s.Dev) == k.Dev && s.Ino == k.Ino {
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
