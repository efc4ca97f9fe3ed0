// Package lockpath is the one home of the rule that turns a target into
// its lock path, and a lock path back into what it locks. The library,
// the command line (run, status, ls, break, update, completion) and the
// agent all ask it, so that one resource has one lock however it is
// reached.
//
// The rule: the lock path of a file or directory target is
// "<target>.lock" beside it, whatever the target's name. A target whose
// last element ends in ".lock" is, besides, a lock file by its name: it
// is what flock(1), gofrs/flock and Python's filelock lock for that name,
// and what package managers keep their data in (yarn.lock, Cargo.lock,
// poetry.lock, flake.lock) and save by renaming a new file over it. hold
// locks such a target in two places: its companion "<target>.lock"
// ("yarn.lock.lock"), which is hold's lock and holds hold's record, and
// the target itself (IsOwn), with a kernel lock that writes nothing into
// it. A tool that replaces the file while it is held then takes nothing
// from hold's lock (the companion is not renamed), the next holder waits
// on the companion, and the file's own kernel lock keeps flock(1) users of
// the file and hold apart while that inode is the file. So "app" and
// "app.lock" still exclude each other: both take the kernel lock of
// app.lock.
//
// Where the companion cannot be made (a directory the user may not
// write, a read-only filesystem), an existing regular file named "*.lock"
// is locked alone, as flock(1) locks it: nobody can rename it there
// either (the root package's own.go applies this, from the error of the
// attempt).
//
// Earlier versions locked a target named "*.lock" itself, without a
// companion: such a holder still excludes this one through the target's
// own kernel lock, but only until the file is replaced.
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

// Append is the rule for what names a lock but is no file of the user's:
// a lock name (its file in the named-lock directory) and the key of a
// protocol with its own namespace (etcd, PostgreSQL): s itself when it
// ends in ".lock", else s + ".lock", so that "deploy" and "deploy.lock"
// are one lock. Nothing but hold's lock lives there, so nothing needs a
// companion.
func Append(s string) string {
	if IsLockName(s) {
		return s
	}
	return s + Suffix
}

// IsOwn reports whether target is a lock file by its name: its last
// element, after the normalisation FromTarget applies, ends in ".lock".
// Besides its lock path ("<target>.lock"), hold then locks the target
// itself, for flock(1) users of the file and for earlier versions of hold,
// which locked it directly (see the package comment).
func IsOwn(target string) bool {
	t, err := normalise(target)
	return err == nil && IsLockName(filepath.Base(t))
}

// FromTarget returns the lock path of a file or directory target:
// target + ".lock", also when target's name ends in ".lock" itself
// ("yarn.lock" is locked through "yarn.lock.lock", and itself: IsOwn).
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
	return t + Suffix, nil
}

// Own returns the normalised target when it is a lock file by name
// (IsOwn): the file whose own kernel lock hold takes besides the lock
// path. ok is false for any other target.
func Own(target string) (path string, ok bool) {
	t, err := normalise(target)
	if err != nil || !IsLockName(filepath.Base(t)) {
		return "", false
	}
	return t, true
}

// Serves reports whether lockPath is target's lock path, or target itself
// as a lock file by name (Own), so a report naming lockPath need not name
// target again.
func Serves(target, lockPath string) bool {
	if p, err := FromTarget(target); err == nil && p == lockPath {
		return true
	}
	own, ok := Own(target)
	return ok && own == lockPath
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
