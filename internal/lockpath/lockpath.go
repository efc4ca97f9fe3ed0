// Package lockpath is the one home of the rule that turns a target into
// its lock path, and a lock path back into what it locks. The library,
// the command line (run, status, ls, break, completion) and the agent all
// ask it, so that one resource has one lock however it is reached.
//
// The rule: a target whose last element ends in ".lock" is its own lock
// file, as flock(1), gofrs/flock, Python's filelock and proper-lockfile
// take it; any other target is locked through "<target>.lock" beside it.
// So "app" and "app.lock" name the same lock, and no path of the form
// "X.lock.lock" is ever derived, except by Beside, for the entry points
// that rewrite their file (see there).
package lockpath

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/hold-dev/hold/lock"
)

// Suffix ends every lock path hold derives.
const Suffix = ".lock"

// IsLockName reports whether a file name (one element, or the last element
// of a path) is a lock file's by the rule: it ends in ".lock".
func IsLockName(name string) bool { return strings.HasSuffix(name, Suffix) }

// Append is the rule on a plain string, for names and for the keys of a
// protocol with its own namespace (etcd, PostgreSQL), where nothing is a
// file path: s itself when it ends in ".lock", else s + ".lock".
func Append(s string) string {
	if IsLockName(s) {
		return s
	}
	return s + Suffix
}

// IsOwn reports whether target is its own lock file: its last element,
// after the normalisation FromTarget applies, ends in ".lock".
func IsOwn(target string) bool {
	t, err := normalise(target)
	return err == nil && IsLockName(filepath.Base(t))
}

// FromTarget returns the lock path of a file or directory target: target
// itself when its last element ends in ".lock", else target + ".lock".
// Before the rule is applied the target is normalised, so that one
// resource has one lock however it is spelled:
//
//   - trailing separators are dropped: "data/" and "data" (as shell
//     completion writes a directory, and as typed) both lock "data.lock";
//   - a target whose last element is "." or ".." (".", "..", "x/..") is
//     made absolute first: "." in /srv/app locks "/srv/app.lock", as
//     "/srv/app" does, where appending ".lock" would give "..lock" or
//     "...lock", hidden files inside the directory;
//   - a root directory ("/", `C:\`) has no place beside it for a lock:
//     lock.ErrInvalidName, with a hint to name the lock file.
//
// Nothing else is rewritten: "a/../b" still means what the kernel finds
// there (through a symlink a, not "b"), and symlinks are not resolved, so
// locks named the way earlier versions named them keep their paths.
func FromTarget(target string) (string, error) {
	t, err := normalise(target)
	if err != nil {
		return "", err
	}
	if IsLockName(filepath.Base(t)) {
		return t, nil
	}
	return t + Suffix, nil
}

// Beside returns "<target>.lock" whatever target ends in: the lock of the
// entry points that rewrite their file (update, append). An update
// replaces the file by renaming a new one over it, so a lock on the file
// itself would stay with the old inode while the next writer locked the
// new one; their lock must stay apart from the file, even when the file
// is a lock file by name (they then also lock the file itself; see
// hold.ForRewrite). The normalisation is FromTarget's.
func Beside(target string) (string, error) {
	t, err := normalise(target)
	if err != nil {
		return "", err
	}
	return t + Suffix, nil
}

// Serves reports whether target's lock path is lockPath, so a report
// naming lockPath need not name target again.
func Serves(target, lockPath string) bool {
	p, err := FromTarget(target)
	return err == nil && p == lockPath
}

// NameOf returns the lock name a file in the named-lock directory holds
// the lock of ("deploy.lock" is the lock of name "deploy", and of name
// "deploy.lock", which is the same lock), and false for another file.
// valid is the name rule (hold.ValidName).
func NameOf(file string, valid func(string) bool) (string, bool) {
	n, ok := strings.CutSuffix(file, Suffix)
	return n, ok && valid(n)
}

// normalise drops trailing separators and makes a target ending in "."
// or ".." absolute; it refuses a root directory.
func normalise(target string) (string, error) {
	t := target
	vol := filepath.VolumeName(t)
	for len(t) > len(vol)+1 && os.IsPathSeparator(t[len(t)-1]) {
		t = t[:len(t)-1]
	}
	rest := t[len(vol):]
	if last := filepath.Base(rest); rest == "" || last == "." || last == ".." {
		// Base of "" is "." too: a bare volume ("C:") is that drive's
		// current directory.
		abs, err := filepath.Abs(t)
		if err != nil {
			return "", &lock.Error{Op: "acquire", Path: target, Err: err, Hint: "the current directory could not be found"}
		}
		t = abs
	}
	if isRoot(t) {
		return "", &lock.Error{Op: "acquire", Path: target, Err: lock.ErrInvalidName,
			Hint: "the root directory has no place beside it for a lock file; name one with --lock-file PATH or --name NAME"}
	}
	return t, nil
}

// IsDirLock reports whether a directory sits at lockPath (not following a
// symbolic link). A directory at a lock path is a portable (dir) lock,
// whatever protocol was chosen: Inspect of any kind and Break treat it so.
func IsDirLock(lockPath string) bool {
	fi, err := os.Lstat(lockPath)
	return err == nil && IsDirLockType(fi.Mode())
}

// IsDirLockType is IsDirLock for a caller that has the type of what sits
// at the lock path already (hold ls, from its directory listing), so that
// the rule is decided here without another lstat.
func IsDirLockType(m fs.FileMode) bool { return m.IsDir() }

// isRoot reports whether t, with its trailing separators dropped down to
// one, is a root directory: "/", `C:\`, "C:/", `\\host\share\`. It looks
// at the bytes instead of comparing filepath.Dir with filepath.Clean,
// which scan the whole path twice on every acquisition.
func isRoot(t string) bool {
	rest := t[len(filepath.VolumeName(t)):]
	return len(rest) == 1 && os.IsPathSeparator(rest[0])
}
