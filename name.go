package hold

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/hold-dev/hold/internal/lockpath"
	"github.com/hold-dev/hold/internal/nameddir"
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

// nameProblem says what makes name invalid (see ValidName), in words.
func nameProblem(name string) string {
	switch {
	case name == "":
		return "the name is empty"
	case len(name) > maxNameLen:
		return fmt.Sprintf("it is %d characters long", len(name))
	case name[0] == '.' || name[0] == '_' || name[0] == '-':
		why := fmt.Sprintf("it starts with %q, and a name starts with a letter or digit", name[0])
		if name[0] == '.' {
			why = "it starts with '.', which would hide its lock file"
		}
		if rest := strings.TrimLeft(name, "._-"); rest != "" && ValidName(rest) {
			why += fmt.Sprintf(": say %q", rest)
		}
		return why
	}
	for _, r := range name {
		switch {
		case r == '/' || r == '\\':
			return "it has a path separator, and a name is not a path: for a lock file of your choosing, use --lock-file PATH"
		case 'A' <= r && r <= 'Z':
			return fmt.Sprintf("it has capitals: say %q", strings.ToLower(name))
		case !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-'):
			return fmt.Sprintf("it has %q", r)
		}
	}
	return "it is not a valid name"
}

// NamedDir returns this user's lock directory for named locks, creating it
// if needed. It is the same for every process of the user on this
// machine, whatever their environment (cron, a login shell, ssh, a systemd
// service, sudo -u): no environment variable is consulted, so one name is
// one lock everywhere. On Linux it is /run/lock/hold-UID where /run/lock
// is a sticky directory everyone may write (Debian, Ubuntu), otherwise,
// and on macOS and the BSDs, /var/tmp/hold-UID; on Windows
// %LocalAppData%\hold\locks. Neither is emptied at logout, and no
// cleaner removes a lock file there while it is held (see Named).
//
// The parent is writable by everyone, so the directory is created with
// mode 0700 and then checked: it must be a real directory (not a
// symlink), owned by this user, and writable by nobody else. Otherwise
// someone could have prepared it to capture or block our locks.
func NamedDir() (string, error) {
	dir, err := nameddir.Dir()
	if err != nil {
		return "", err
	}
	if runtime.GOOS == "windows" {
		return dir, os.MkdirAll(dir, 0o700)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return "", err
	}
	if err := checkPrivateDir(dir); err != nil {
		if errors.Is(err, nameddir.ErrNotPrivate) {
			err = foreignDir{err}
		}
		return "", err
	}
	return dir, nil
}

// foreignDir is a named-lock directory that someone else made, or may
// write: something hold did not create, which it does not use (it
// matches ErrForeign).
type foreignDir struct{ err error }

func (e foreignDir) Error() string      { return e.err.Error() }
func (e foreignDir) Unwrap() error      { return e.err }
func (foreignDir) Is(target error) bool { return target == ErrForeign }

// namedPath validates name and returns its lock path.
// A protocol with its own namespace (lock.Namer, as etcd has) places the
// name there instead of in the local lock directory.
func namedPath(name string, p Protocol) (string, error) {
	if !ValidName(name) {
		return "", &Error{Op: "name", Path: name, Err: ErrInvalidName,
			Hint: nameProblem(name) + "; a name is one lowercase component of at most 64 characters: a-z, 0-9, '.', '_', '-', starting with a letter or digit"}
	}
	if n, ok := p.(lock.Namer); ok {
		return n.NamedPath(name), nil
	}
	dir, err := NamedDir()
	if err != nil {
		return "", &Error{Op: "lock directory", Path: name, Err: err}
	}
	// A name ending in ".lock" is its own lock file: "deploy" and
	// "deploy.lock" are one lock (no data lives there).
	return filepath.Join(dir, lockpath.Append(name)), nil
}

// targetLockPath returns the lock path of a file or directory target:
// "<target>.lock" beside it, whatever target's name (a target named
// "*.lock" is locked itself too: see lockOwn). The rule and the
// normalisation of the target (trailing separators, ".", a root
// directory) are lockpath.FromTarget's, the one place a target becomes a
// lock path, for the command line, the agent (and so Node and Python) and
// the Go API alike.
func targetLockPath(target string) (string, error) { return lockpath.FromTarget(target) }

// refuseSpecialTarget refuses, just before a lock file would be created
// beside it, a target that is a device, a socket or a named pipe: its
// directory is not a place for a lock file of the user's (`hold run
// /dev/null` would make /dev/null.lock in /dev), and nothing a lock beside
// it could guard is a file there; and a target named "*.lock" that is a
// lock directory of the portable protocol, whose own lock would be
// refused (refusePortableOwn). It costs nothing once the lock file
// exists, as it does for every lock taken before.
func refuseSpecialTarget(target string) error {
	fi, err := os.Stat(target)
	if err == nil && fi.IsDir() && lockpath.IsOwn(target) {
		// Its own lock would be refused once the lock file is made.
		return refusePortableOwn(target, target)
	}
	if err != nil || fi.Mode()&(os.ModeDevice|os.ModeCharDevice|os.ModeSocket|os.ModeNamedPipe) == 0 {
		return nil
	}
	return &Error{Op: "acquire", Path: target, Err: errSpecialTarget,
		Hint: "a lock beside it would be " + target + ".lock, a file of hold's in that directory: name a lock file of yours or a named lock instead"}
}

// errSpecialTarget is refuseSpecialTarget's cause; it matches
// ErrNotRegular.
var errSpecialTarget specialTarget

type specialTarget struct{}

func (specialTarget) Error() string {
	return "the target is a device, socket or pipe, not a file or directory"
}
func (specialTarget) Is(target error) bool { return target == ErrNotRegular }

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
	return targetLockPath(target)
}

// explicit reports whether the lock path is the file the caller named,
// with LockFile. Such a file holding anything but hold's record (a data
// file, another tool's lock) is locked without being written, as flock(1)
// locks it; a derived path holding one is refused
// (lock.Request.Explicit). A target named "*.lock" is never its lock
// path: its own lock (lockOwn) writes nothing into it.
func (c *config) explicit(string) bool { return c.lockFile != "" }

// refuseNUL refuses a target or lock file with a NUL byte, which no path of
// any system can hold: the system call would fail with a bare "invalid
// argument", reported as an I/O error; this names it as the bad name it is.
func (c *config) refuseNUL(target string) error {
	for _, p := range []string{target, c.lockFile} {
		if strings.IndexByte(p, 0) >= 0 {
			return &Error{Op: "acquire", Path: strings.ReplaceAll(p, "\x00", `\0`), Err: ErrInvalidName,
				Hint: "a path cannot contain a NUL byte"}
		}
	}
	return nil
}
