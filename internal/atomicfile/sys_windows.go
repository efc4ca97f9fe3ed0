//go:build windows

package atomicfile

import "io/fs"

// syncDir is a no-op: Windows cannot open a directory for FlushFileBuffers
// without backup privileges, and NTFS journals the rename itself.
func syncDir(name string) error { return nil }

// writable relies on the read-only attribute, which Resolve already checks
// through the permission bits Go derives from it.
func writable(name string) error { return nil }

// syncFS is a no-op, as syncDir is.
func syncFS(name string) error { return nil }

// noFollow: Windows has no O_NOFOLLOW; resolve checks the file's type.
const noFollow = 0

// ownerOf: a Windows file's owner is in its security descriptor, which a
// file created in the same directory inherits; nothing to compare.
func ownerOf(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

// linkCount: hard links are rare on Windows and not counted here.
func linkCount(fs.FileInfo) uint64 { return 1 }

// canKeepOwner: see ownerOf.
func canKeepOwner(string, fs.FileInfo) error { return nil }
