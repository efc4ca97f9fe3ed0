//go:build darwin || freebsd

package fsinfo

import (
	"os"

	"golang.org/x/sys/unix"
)

// Stat identifies the filesystem holding dir from statfs(2):
// f_fstypename names it ("apfs", "nfs", "smbfs", "macfuse") and the
// MNT_LOCAL flag says whether the kernel considers it local, which also
// covers types doctor has no table entry for.
func Stat(dir string) (Filesystem, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Filesystem{}, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	fs := Filesystem{
		Type:   unix.ByteSliceToString(st.Fstypename[:]),
		Source: unix.ByteSliceToString(st.Mntfromname[:]),
		Mount:  unix.ByteSliceToString(st.Mntonname[:]),
	}
	fs.classify()
	if st.Flags&unix.MNT_LOCAL == 0 && !fs.FUSE {
		fs.Network = true
	} else if !fs.Known && !fs.FUSE {
		// The kernel vouches for it being local.
		fs.Known = true
		fs.Class = Local
	}
	return fs, nil
}
