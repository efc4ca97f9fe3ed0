//go:build !unix

package deadlock

import "os"

// fileID has no device and inode number to read from a FileInfo here
// (Windows): locks are then told apart by their canonical path.
func fileID(os.FileInfo) (string, bool) { return "", false }
