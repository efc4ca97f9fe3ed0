package flock

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/hold-dev/hold/lock"
)

// dirHint is the hint for a directory at a lock path hold derived: hold
// did not make it, so it is not hold's to advise removing.
const dirHint = "it is a directory, not a lock file; choose another lock path, or name the directory itself with --lock-file to lock it as flock(1) does"

// isPortableLock reports whether the directory at path is a lock of the
// portable protocol's. That protocol's package, which decides what its
// locks look like, sets it (SetPortableLockCheck); it imports this one, so
// it cannot be asked directly. Unset, no directory is one.
var isPortableLock = func(string) bool { return false }

// SetPortableLockCheck installs the portable protocol's rule for what
// directory is one of its locks, which a kernel lock must not be taken
// on (see portableDirError). internal/dirlock calls it from init.
func SetPortableLockCheck(isLock func(path string) bool) { isPortableLock = isLock }

// portableDirError refuses a kernel lock on a directory that is a lock of
// the portable protocol: its holder holds it by its existence, not by a
// kernel lock, so a kernel lock on it would not exclude that holder.
func portableDirError(path string) error {
	return &lock.Error{Op: "open", Path: path, Err: lock.ErrNotRegular,
		Hint: "it is a directory lock of the portable protocol, as hold run --protocol dir and Node's proper-lockfile take it: a kernel lock would not exclude its holder, with --lock-file or without; take it with --protocol dir, as its holder does"}
}

// IsPortableLock reports whether the directory at path is a lock of the
// portable protocol's (see SetPortableLockCheck), which a kernel lock
// would not exclude the holder of.
func IsPortableLock(path string) bool { return isPortableLock(path) }

// missingHint explains ENOENT from creating the lock file at path: its
// directory is missing, or it exists on a filesystem that lets nobody
// create files (/proc, /sys).
func missingHint(path string) string {
	if fi, err := os.Stat(filepath.Dir(path)); err == nil && fi.IsDir() {
		return "its directory exists, but the filesystem there does not let files be created; choose a lock path on an ordinary filesystem"
	}
	return MissingDirHint
}

// MissingDirHint is the hint for a lock file whose directory does not
// exist: hold never makes it unless asked (see docs/cli.md, "Missing
// directories"). The library cannot know who called it, so it names every
// front end's way; a front end that knows its caller's replaces it with
// MissingDirHintFor (HintMakeDirs).
const MissingDirHint = missingDirStart + "hold run --make-dirs, hold.MakeDirs in Go, makeDirs in Node, make_dirs in Python"

const missingDirStart = "the directory that should hold the lock file does not exist; create it first, or ask hold to make it: "

// MissingDirHintFor is the missing-directory hint that names one way to
// have hold make the directory: how ("hold append --make-dirs",
// "make_dirs=True").
func MissingDirHintFor(how string) string { return missingDirStart + how }

// HintMakeDirs rewrites the missing-directory hint in err, which names every
// front end's option, to name only how (see MissingDirHintFor), and
// reports whether it did. err's message, which carries the hint, changes
// with it.
func HintMakeDirs(err error, how string) bool {
	var le *lock.Error
	if !errors.As(err, &le) || le.Hint != MissingDirHint {
		return false
	}
	le.Hint = MissingDirHintFor(how)
	return true
}
