package dirlock

import (
	"os"

	"golang.org/x/sys/unix"
)

// renameExclusive renames from to to in one step that fails if to exists:
// macOS's renamex_np with RENAME_EXCL, as renameat2 does on Linux. ok is
// false where the filesystem lacks the flag, and the caller falls back.
func renameExclusive(from, to string) (ok bool, err error) {
	err = unix.RenamexNp(from, to, unix.RENAME_EXCL)
	if err == unix.ENOTSUP || err == unix.EINVAL {
		return false, nil
	}
	if err != nil {
		return true, &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return true, nil
}
