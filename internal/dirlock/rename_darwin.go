package dirlock

import (
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplace moves from to to only if to does not exist. macOS's
// renamex_np with RENAME_EXCL makes it one step, as renameat2 does on
// Linux: rename(2) alone would replace an empty directory, which may be
// another tool's lock made a moment before (proper-lockfile writes nothing
// into its directory).
func renameNoReplace(from, to string) error {
	err := unix.RenamexNp(from, to, unix.RENAME_EXCL)
	if err == unix.ENOTSUP || err == unix.EINVAL {
		// A filesystem without the flag: the check and the rename are two
		// steps there, as on the BSDs.
		return renameCheckThenMove(from, to)
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	return nil
}
