package hold

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/hold-dev/hold/lock"
)

// maxNameLen bounds a lock name; with ".lock" it stays far below any
// filesystem's limit on one component.
const maxNameLen = 64

// ValidName reports whether name can name a lock: one component of at most
// 64 characters from a-z, 0-9, '.', '_' and '-', starting with a letter or
// digit (so never "." or ".." and never hidden).
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > maxNameLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// NamedDir returns this user's lock directory for named locks, creating it
// if needed: "$XDG_RUNTIME_DIR/hold" when XDG_RUNTIME_DIR is set (a
// per-user tmpfs that the system empties at logout), otherwise
// "<temp dir>/hold-<uid>". The latter sits in a directory everyone can
// write, so it is created with mode 0700 and then checked: it must be a
// real directory (not a symlink), owned by this user, and writable by
// nobody else. Otherwise someone could have prepared it to capture or
// block our locks.
func NamedDir() (string, error) {
	dir, err := NamedDirPath()
	if err != nil {
		return "", err
	}
	if runtime.GOOS == "windows" {
		return dir, os.MkdirAll(dir, 0o700)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", err
	}
	return dir, checkPrivateDir(dir)
}

// NamedDirPath returns where NamedDir keeps named locks without creating
// or checking anything, for a caller that only looks (`hold ls`).
func NamedDirPath() (string, error) {
	if runtime.GOOS == "windows" {
		base, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		return filepath.Join(base, "hold", "locks"), nil
	}
	if x := os.Getenv("XDG_RUNTIME_DIR"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "hold"), nil
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("hold-%d", os.Getuid())), nil
}

// namedPath validates name and returns its lock path.
// A protocol with its own namespace (lock.Namer, as etcd has) places the
// name there instead of in the local lock directory.
func namedPath(name string, p Protocol) (string, error) {
	if !ValidName(name) {
		return "", &Error{Op: "name", Path: name, Err: ErrInvalidName,
			Hint: "use one lowercase component of at most 64 characters: a-z, 0-9, '.', '_', '-'"}
	}
	if n, ok := p.(lock.Namer); ok {
		return n.NamedPath(name), nil
	}
	dir, err := NamedDir()
	if err != nil {
		return "", &Error{Op: "lock directory", Path: name, Err: err}
	}
	return filepath.Join(dir, name+".lock"), nil
}

// targetLockPath returns the lock path of a file or directory target: the
// target's own path with ".lock" appended, beside it. It is the one place
// a target becomes a lock path, for the command line, the agent (and so
// Node) and the Go API alike, so that one resource has one lock however it
// is spelled:
//
//   - trailing separators are dropped: "data/" and "data" (as shell
//     completion writes a directory, and as typed) both lock "data.lock";
//   - a target whose last element is "." or ".." (".", "..", "x/..") is
//     made absolute first: "." in /srv/app locks "/srv/app.lock", as
//     "/srv/app" does, where appending ".lock" would give "..lock" or
//     "...lock", hidden files inside the directory;
//   - a root directory ("/", `C:\`) has no place beside it for a lock:
//     ErrInvalidName, with a hint to name the lock file.
//
// Nothing else is rewritten: "a/../b" still means what the kernel finds
// there (through a symlink a, not "b"), and symlinks are not resolved, so
// locks named the way earlier versions named them keep their paths.
func targetLockPath(target string) (string, error) {
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
			return "", &Error{Op: "acquire", Path: target, Err: err, Hint: "the current directory could not be found"}
		}
		t = abs
	}
	// Clean: Dir of "C:/" is `C:\`, which must count as the root too.
	if filepath.Dir(t) == filepath.Clean(t) {
		return "", &Error{Op: "acquire", Path: target, Err: ErrInvalidName,
			Hint: "the root directory has no place beside it for a lock file; use --lock-file PATH or --name NAME (LockFile or Named in Go)"}
	}
	return t + ".lock", nil
}

// LockFile uses exactly path as the lock path, instead of "<target>.lock".
//
// hold writes its owner record and token into a lock file only when the
// file is provably its own: empty, or holding a record of hold's, with one
// link. A file named here that holds anything else (the data file itself,
// as in flock(1)'s `flock data.json CMD`, or another tool's file) is
// locked without being written, as flock(1) locks it: the lock excludes
// every other holder, but the holder has no record and Token is 0
// (Lock.TokenError says why). To have the record and the token, lock a
// separate file.
func LockFile(path string) Option {
	return func(c *config) { c.lockFile = path; c.name = ""; c.named = false }
}

// Named puts the lock in this user's private lock directory under name, for
// locks that guard something other than one file ("deploy", "nightly-db").
// A name is one component of at most 64 characters from a-z, 0-9, '.', '_'
// and '-', starting with a letter or digit; anything else fails with
// ErrInvalidName before the disk is touched. See NamedDir for where the
// directory is.
func Named(name string) Option {
	return func(c *config) { c.name = name; c.named = true; c.lockFile = "" }
}

// lockPath returns the lock path the options and target name.
func (c *config) lockPath(target string) (string, error) {
	switch {
	case c.lockFile != "":
		return c.lockFile, nil
	case c.named:
		// Even Named(""): an empty name is invalid, not a request for
		// the default lock path.
		return namedPath(c.name, c.protocol)
	case target == "":
		return "", &Error{Op: "acquire", Path: target, Err: errors.New("no target, lock file or name given")}
	}
	if _, ok := c.protocol.(lock.Namer); ok {
		// A protocol with its own namespace (etcd, PostgreSQL): the
		// target is a key there, not a file of this machine.
		return target + ".lock", nil
	}
	return targetLockPath(target)
}
