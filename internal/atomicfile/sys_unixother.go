//go:build unix && !linux

package atomicfile

import "golang.org/x/sys/unix"

// syncFS falls back to sync(2), which flushes every file system: these
// systems have no syncfs(2), and it serves only the rare directory that
// cannot be opened to be synced.
func syncFS(name string) error {
	unix.Sync()
	return nil
}
