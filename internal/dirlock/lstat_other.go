//go:build !windows

package dirlock

import "os"

// lstat is os.Lstat, whose (device, inode) os.SameFile compares (see
// lstat_windows.go for why Windows needs more).
func lstat(path string) (os.FileInfo, error) { return os.Lstat(path) }
