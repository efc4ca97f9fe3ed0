package atomicfile

import (
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// syncFS syncs the file system that holds name with syncfs(2), given a
// descriptor of name itself: the one way left to make a rename durable in
// a directory that this process may write but not open.
func syncFS(name string) error {
	f, err := os.OpenFile(name, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		// A file we may write but not read (mode 0200).
		if f, err = os.OpenFile(name, os.O_WRONLY|unix.O_NOFOLLOW, 0); err != nil {
			return err
		}
	}
	defer f.Close()
	if err := unix.Syncfs(int(f.Fd())); err != nil {
		return &fs.PathError{Op: "syncfs", Path: name, Err: err}
	}
	return nil
}
