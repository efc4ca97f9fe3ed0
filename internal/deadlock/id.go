package deadlock

import (
	"os"
	"path/filepath"
	"strconv"
)

// Which lock a lock path is, for the deadlock checks: one lock however it
// is spelled. A path through a symlinked directory, with "..", relative
// or absolute, or another hard link of the same lock file, names the same
// lock as the spelling it was taken by, and a wait for it is the same
// deadlock. So the table of locks held here (held.go) and the locks
// given to FailIfHeldBy are compared by the lock itself:
//
//   - a file (a kernel lock's file) by its device and inode;
//   - anything else in the file system (a portable lock's directory, a
//     path where nothing is yet) by its canonical path: absolute, with
//     the symlinks of its directory resolved;
//   - a lock that lives on a server (a protocol that is a lock.Closer:
//     etcd, PostgreSQL) by its key as given, which names it there.

// lockID names one lock of one protocol; see above.
type lockID struct{ proto, id string }

// idOf returns the identity of the lock at path of the protocol name,
// which keeps its locks on a server when network is set.
func idOf(name string, network bool, path string) lockID {
	if network {
		return lockID{name, "key:" + path}
	}
	return fileLockID(name, path)
}

// fileLockID is idOf for a lock in this machine's file system.
func fileLockID(name, path string) lockID {
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() {
		if id, ok := fileID(fi); ok {
			return lockID{name, id}
		}
	}
	return lockID{name, "path:" + canonicalPath(path)}
}

// fileKeyID is the identity of the file of device dev and inode ino.
func fileKeyID(dev, ino uint64) string {
	return "ino:" + strconv.FormatUint(dev, 10) + ":" + strconv.FormatUint(ino, 10)
}

// canonicalPath is path made absolute and cleaned, with the symlinks of
// what exists of it resolved (the whole path where it exists, else its
// directory).
func canonicalPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		return p
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}
