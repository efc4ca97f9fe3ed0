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

// keepOwner gives the replacement the original's owner and group when they
// differ from ours, which only root (or a member of the group) may do;
// otherwise the replacement stays ours, as with any editor's save.
func keepOwner(f File, orig fs.FileInfo) {
	st, ok := orig.Sys().(*syscall.Stat_t)
	if !ok {
		return
	}
	of, ok := f.(*os.File)
	if !ok {
		return
	}
	uid, gid := int(st.Uid), int(st.Gid)
	if uid == os.Geteuid() && gid == os.Getegid() {
		return
	}
	// An error leaves the replacement owned by us, which is the best that
	// can be done without privilege.
	of.Chown(uid, gid)
}
