//go:build unix && !linux

package dirlock

import "os"

// renameCheckThenMove is renameNoReplace where the system cannot refuse an
// existing name in one step.
func renameCheckThenMove(from, to string) error {
	if _, err := os.Lstat(to); err == nil {
		return os.ErrExist
	}
	return os.Rename(from, to)
}
