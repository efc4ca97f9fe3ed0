package doctor

import "github.com/hold-dev/hold/internal/fsinfo"

// Filesystem describes the filesystem that holds the checked directory, as
// the operating system reports it and as doctor's tables classify it. The
// same identification serves the library's warning about kernel locks
// that may stay on this machine.
type Filesystem struct {
	// Type is the filesystem's name as the OS reports it: "ext4",
	// "tmpfs", "nfs4", "fuse.sshfs", "apfs", "NTFS". Empty when it could
	// not be found out.
	Type string `json:"type"`
	// Magic is Linux's statfs f_type, in hex ("0xef53"); empty elsewhere.
	Magic string `json:"magic,omitempty"`
	// Subtype is the FUSE subtype ("sshfs" for "fuse.sshfs"), when known.
	Subtype string `json:"subtype,omitempty"`
	// Source is what is mounted: a device, "server:/export",
	// "//host/share", or, for a FUSE filesystem such as bindfs, the
	// directory it mirrors.
	Source string `json:"source,omitempty"`
	// Mount is the mount point that contains the path, when known.
	Mount string `json:"mount,omitempty"`
	// LocalLock is the NFS mount option local_lock (none, flock, posix,
	// all) on Linux: with "flock" or "all" the client keeps flock(2)
	// locks to itself, so other hosts never see them.
	LocalLock string `json:"local_lock,omitempty"`
	// LockOptions are the mount options, other than local_lock, that keep
	// locks on this machine: "nolock" (NFS), "nobrl" (SMB), "localflock"
	// (Lustre), "localflocks" (OCFS2, GFS2).
	LockOptions []string `json:"lock_options,omitempty"`
	// Network is true for a filesystem whose data other machines can
	// reach: NFS, SMB, 9P, Ceph, a FUSE filesystem backed by a remote
	// store.
	Network bool `json:"network"`
	// FUSE is true for a filesystem in user space.
	FUSE bool `json:"fuse"`
	// Known is true when the type is in doctor's tables, so Network and
	// FUSE can be trusted; for an unknown type they are guesses.
	Known bool `json:"known"`
	// Mirror is the filesystem of the directory that a FUSE filesystem
	// without a subtype (bindfs and its kin) names as its source, when
	// that is a directory of this machine: the daemon passes mkdir and
	// create to it.
	Mirror *Filesystem `json:"mirror,omitempty"`
}

// String names the filesystem for a message: "ext4", "fuse.sshfs",
// "nfs4 (local_lock=flock)", "fuse (source /srv/data)".
func (f Filesystem) String() string { return f.info().String() }

// publicFilesystem is what the report shows of fs: everything but the
// class the verdict reasons from.
func publicFilesystem(fs fsinfo.Filesystem) Filesystem {
	f := Filesystem{Type: fs.Type, Magic: fs.Magic, Subtype: fs.Subtype, Source: fs.Source, Mount: fs.Mount,
		LocalLock: fs.LocalLock, LockOptions: fs.LockOptions, Network: fs.Network, FUSE: fs.FUSE, Known: fs.Known}
	if fs.Mirror != nil {
		m := publicFilesystem(*fs.Mirror)
		f.Mirror = &m
	}
	return f
}

// info is publicFilesystem's inverse, without the class (which String
// does not use).
func (f Filesystem) info() fsinfo.Filesystem {
	fs := fsinfo.Filesystem{Type: f.Type, Magic: f.Magic, Subtype: f.Subtype, Source: f.Source, Mount: f.Mount,
		LocalLock: f.LocalLock, LockOptions: f.LockOptions, Network: f.Network, FUSE: f.FUSE, Known: f.Known}
	if f.Mirror != nil {
		m := f.Mirror.info()
		fs.Mirror = &m
	}
	return fs
}
