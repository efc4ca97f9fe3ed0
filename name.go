package hold

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/hold-dev/hold/internal/lockpath"
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
	// A name ending in ".lock" is its own lock file, as a target is.
	return filepath.Join(dir, lockpath.Append(name)), nil
}

// targetLockPath returns the lock path of a file or directory target:
// the target itself when its last element ends in ".lock" (what flock(1),
// gofrs/flock and filelock users mean by such a name), else "<target>.lock"
// beside it. The rule and the normalisation of the target (trailing
// separators, ".", a root directory) are lockpath.FromTarget's, the one
// place a target becomes a lock path, for the command line, the agent (and
// so Node and Python) and the Go API alike.
func targetLockPath(target string) (string, error) { return lockpath.FromTarget(target) }

// LockFile uses exactly path as the lock path, instead of the one derived
// from the target ("<target>.lock", or the target itself when its name
// ends in ".lock").
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
// locks that guard something other than one file ("deploy", "nightly-db"):
// the file "<name>.lock" there, or "<name>" for a name that ends in ".lock"
// (so "deploy" and "deploy.lock" are one lock).
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
		return lockpath.Append(target), nil
	}
	if c.rewrite {
		// The file will be replaced: its lock stays apart from it even
		// when it is its own lock by name (see ForRewrite).
		return lockpath.Beside(target)
	}
	return targetLockPath(target)
}

// explicit reports whether the lock path is the file the caller named:
// with LockFile, or as a target that is its own lock file ("app.lock").
// Such a file holding anything but hold's record (Cargo.lock, another
// tool's lock, data) is locked without being written, as flock(1) locks
// it; a derived path holding one is refused (lock.Request.Explicit).
func (c *config) explicit(target string) bool {
	if c.lockFile != "" {
		return true
	}
	if c.named || c.rewrite || target == "" {
		return false
	}
	if _, ok := c.protocol.(lock.Namer); ok {
		return false
	}
	return lockpath.IsOwn(target)
}
