package atomicfile

import (
	"os"
	"path/filepath"

	"github.com/hold-dev/hold/lock"
)

// CheckLockFile refuses a lock file that is the file an update or append
// changes (lockFile "" is the default, TARGET.lock, and always fine). An
// update replaces the file, so a lock on it would stay with the old inode
// and guard nothing, and the owner record would land in the data. It is
// the one place this rule lives, for the library and the command alike.
func CheckLockFile(op, file, lockFile string) error {
	if lockFile == "" || !sameFile(file, lockFile) {
		return nil
	}
	return &lock.Error{Op: op, Path: file, Err: lock.ErrLockIsTarget,
		Hint: op + " changes this file, so a lock on the file itself would guard nothing; lock a separate file (the default " + file + ".lock, another lock file, or a named lock)"}
}

// sameFile reports whether two paths name one file: the same path, or,
// when both exist, the same file by identity (a hard link, a symlink).
func sameFile(a, b string) bool {
	if aa, err := filepath.Abs(a); err == nil {
		if bb, err := filepath.Abs(b); err == nil && aa == bb {
			return true
		}
	}
	ai, err := os.Stat(a)
	if err != nil {
		return false
	}
	bi, err := os.Stat(b)
	return err == nil && os.SameFile(ai, bi)
}
