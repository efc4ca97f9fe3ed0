//go:build unix

package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// syncDir fsyncs a directory, which is what makes a rename or a new name
// in it survive a crash.
func syncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	defer d.Close()
	err = d.Sync()
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTTY) {
		// Some file systems (FUSE, SMB, F_FULLFSYNC on a directory on
		// macOS) cannot sync a directory. The rename is done; nothing more
		// can be asked of them, and failing would report a published
		// update as failed.
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "fsync", Path: name, Err: err}
	}
	return nil
}

// writable asks the kernel whether this process may write name, so that
// Update refuses a file it could not have changed in place, even though
// the directory would let it rename a new file over it.
func writable(name string) error {
	if err := unix.Access(name, unix.W_OK); err != nil {
		return &fs.PathError{Op: "access", Path: name, Err: err}
	}
	return nil
}

// noFollow makes an open of the resolved file fail rather than follow a
// symlink that replaced it since it was resolved.
const noFollow = unix.O_NOFOLLOW

// ownerOf returns a file's owner and group.
func ownerOf(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// linkCount returns how many names (hard links) a file has.
func linkCount(fi fs.FileInfo) uint64 {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 1
	}
	return uint64(st.Nlink)
}

// canKeepOwner refuses, before anything is written, a file whose owner or
// group this process could not give a new file: only root may chown a
// file to another user, and only a member of a group to that group. The
// chown in keepOwner is the final word; this check spares the work (and
// the filter's run) that it would throw away.
func canKeepOwner(path string, fi fs.FileInfo) error {
	uid, gid, ok := ownerOf(fi)
	euid := os.Geteuid()
	if !ok || euid == 0 {
		return nil
	}
	if uid != euid || !inGroup(gid) {
		return &OwnerError{Path: path, UID: uid, GID: gid, Self: euid}
	}
	return nil
}

// inGroup reports whether this process may give a file it owns group gid.
func inGroup(gid int) bool {
	if gid == os.Getegid() {
		return true
	}
	groups, _ := os.Getgroups()
	for _, g := range groups {
		if g == gid {
			return true
		}
	}
	return false
}
