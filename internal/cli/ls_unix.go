//go:build unix

package cli

import (
	"os"

	"golang.org/x/sys/unix"
)

// readHead reads up to n bytes from the start of the file at path. It
// never blocks (a FIFO put at the path meanwhile) and never follows a
// symbolic link.
func readHead(path string, n int) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	b := make([]byte, n)
	m, err := unix.Pread(fd, b, 0)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return b[:m], nil
}
