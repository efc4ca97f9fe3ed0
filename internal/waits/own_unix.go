//go:build unix

package waits

import (
	"errors"
	"os"
	"syscall"
)

// openOwn opens the file at path for reading when it is this user's own
// entry: a regular file, not a symbolic link, owned by this user and
// writable by nobody else.
func openOwn(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o022 != 0 {
		f.Close()
		return nil, errNotOwn
	}
	return f, nil
}

var errNotOwn = errors.New("not an entry of this user's")
