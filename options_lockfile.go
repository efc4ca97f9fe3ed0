package hold

import "io/fs"

// The options about the lock file an acquisition creates (see Option).

// MakeDirs makes the lock file's missing parent directories (mode 0777
// under the umask), as Python's filelock does, instead of failing because
// the directory does not exist (an error matching fs.ErrNotExist, the
// default in Go, the hold command, Node and Python alike). Kernel locks
// honour it.
func MakeDirs() Option {
	return Option{kind: optMakeDirs, set: func(c *config) { c.makeDirs = true }}
}

// LockFileMode gives a lock file this acquisition creates the permission
// bits perm, under the umask (0666 otherwise), as filelock's mode= does.
// An existing lock file keeps its own. Kernel locks honour it.
func LockFileMode(perm fs.FileMode) Option {
	return Option{kind: optLockFileMode, set: func(c *config) { c.mode = perm.Perm() }}
}
