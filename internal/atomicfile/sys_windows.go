//go:build windows

package atomicfile

import "io/fs"

// syncDir is a no-op: Windows cannot open a directory for FlushFileBuffers
// without backup privileges, and NTFS journals the rename itself.
func syncDir(name string) error { return nil }

// writable relies on the read-only attribute, which Resolve already checks
// through the permission bits Go derives from it.
func writable(name string) error { return nil }

// keepOwner is a no-op: a file created in a directory inherits its ACL.
func keepOwner(f File, orig fs.FileInfo) {}
