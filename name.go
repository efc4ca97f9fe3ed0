package hold

import (
	"fmt"
	"github.com/hold-dev/hold/internal/core"
	"os"
	"path/filepath"
	"runtime"
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
// A protocol with its own namespace (core.Namer, as etcd has) places the
// name there instead of in the local lock directory.
func namedPath(name string, p Protocol) (string, error) {
	if !ValidName(name) {
		return "", &Error{Op: "name", Path: name, Err: ErrInvalidName,
			Hint: "use one lowercase component of at most 64 characters: a-z, 0-9, '.', '_', '-'"}
	}
	if n, ok := p.(core.Namer); ok {
		return n.NamedPath(name), nil
	}
	dir, err := NamedDir()
	if err != nil {
		return "", &Error{Op: "lock directory", Path: name, Err: err}
	}
	return filepath.Join(dir, name+".lock"), nil
}
