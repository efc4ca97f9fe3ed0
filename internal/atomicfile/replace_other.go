//go:build !windows

package atomicfile

import (
	"io/fs"
	"os"
)

// openFile is os.OpenFile: a Unix rename replaces a file whoever has it
// open (see replace_windows.go for Windows).
func openFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}

// rename is os.Rename, atomic on Unix: a reader that has the old file open
// goes on reading it.
func rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
