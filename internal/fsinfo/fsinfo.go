// Package fsinfo identifies the filesystem holding a path and says what it
// means for hold's locks: whether it is local, a network filesystem or FUSE,
// and whether kernel locks taken on it may stay on this machine, unseen by
// other machines that share the files.
//
// It is the one place that knows filesystem types: `hold doctor`
// (the doctor package) reports them, and the lock path asks LocalLocks, which is
// cheap enough to run on every acquisition (one statfs on a local disk).
//
// # Kernel locks that stay on this machine
//
// A kernel lock (flock(2)) is as wide as the filesystem makes it. LocalLocks
// reports the filesystems where processes on other machines (or behind
// another mount of the same files) may not see it:
//
//   - NFS mounted with local_lock=flock, local_lock=all or nolock: the
//     client keeps flock locks in its own kernel by request. NFSv4, and
//     NFSv3 with lockd, turn flock into a byte-range lock the server
//     enforces for every client: not reported.
//   - SMB/CIFS mounted with nobrl: byte-range locks (which Linux's client
//     uses for flock) are not sent to the server. Without it: not reported.
//   - Lustre mounted with localflock, OCFS2 and GFS2 mounted with
//     localflocks: the cluster filesystem is told to keep flock local to
//     each node. Without those options their locks are cluster-wide.
//   - FUSE: the kernel hands flock to the daemon only if the daemon asks
//     for it; otherwise it keeps the lock itself, per mount, so other
//     machines and even another mount of the same directory on this
//     machine never see it. That is the case of sshfs, s3fs, gcsfuse,
//     rclone, goofys and bindfs (without --enable-lock-forwarding), and is
//     assumed of any FUSE filesystem not known otherwise. Known to pass
//     locks to a cluster-wide lock service: glusterfs, ceph-fuse, JuiceFS,
//     MooseFS and LizardFS. Known to keep their data on this machine
//     behind a single mount: ntfs-3g and other fuseblk filesystems,
//     exfat-fuse, fuse-overlayfs, squashfuse, lxcfs.
//   - 9p (QEMU's virtfs, WSL 2's Windows drives): the common servers grant
//     every lock request without keeping it, so the host never sees it.
//   - VirtualBox and Parallels shared folders, User-mode Linux's hostfs,
//     virtiofs: the guest's kernel keeps the lock; the host and other
//     guests do not see it.
//
// Local filesystems, NFS and SMB with server locks, and the other cluster
// filesystems (Ceph, GPFS, AFS, BeeGFS, ...) are not reported. On macOS and
// the BSDs only FUSE (macFUSE) is reported, from statfs alone; Windows'
// LockFileEx on a share is decided by the server, and nothing is reported.
package fsinfo

import "strings"

// Filesystem describes the filesystem that holds a path.
type Filesystem struct {
	// Type is the filesystem's name as the OS reports it: "ext4", "tmpfs",
	// "nfs4", "fuse.sshfs", "apfs", "NTFS". Empty when it could not be
	// found out.
	Type string `json:"type"`
	// Magic is Linux's statfs f_type, in hex ("0xef53"); empty elsewhere.
	Magic string `json:"magic,omitempty"`
	// Subtype is the FUSE subtype ("sshfs" for "fuse.sshfs"), when known.
	Subtype string `json:"subtype,omitempty"`
	// Source is what is mounted: a device, "server:/export", "//host/share",
	// or, for a FUSE filesystem such as bindfs, the directory it mirrors.
	Source string `json:"source,omitempty"`
	// Mount is the mount point that contains the path, when known.
	Mount string `json:"mount,omitempty"`
	// LocalLock is the NFS mount option local_lock (none, flock, posix,
	// all) on Linux: with "flock" or "all" the client keeps flock(2) locks
	// to itself, so other hosts never see them.
	LocalLock string `json:"local_lock,omitempty"`
	// LockOptions are the mount options, other than local_lock, that keep
	// locks on this machine: "nolock" (NFS), "nobrl" (SMB), "localflock"
	// (Lustre), "localflocks" (OCFS2, GFS2).
	LockOptions []string `json:"lock_options,omitempty"`
	// Network is true for a filesystem whose data other machines can
	// reach: NFS, SMB, 9P, Ceph, a FUSE filesystem backed by a remote store.
	Network bool `json:"network"`
	// FUSE is true for a filesystem in user space.
	FUSE bool `json:"fuse"`
	// Known is true when the type is in this package's tables, so Network
	// and FUSE can be trusted; for an unknown type they are guesses.
	Known bool `json:"known"`
	// Mirror is the filesystem of the directory that a FUSE filesystem
	// without a subtype (bindfs and its kin) names as its source, when
	// that is a directory of this machine: the daemon passes mkdir and
	// create to it.
	Mirror *Filesystem `json:"mirror,omitempty"`

	// Class is what the tables make of the type.
	Class Class `json:"-"`
}

// Class is what is known about a filesystem type.
type Class int

// The classes.
const (
	// Unknown: not in the tables.
	Unknown Class = iota
	// Local: the data lives on this machine and every process that
	// reaches it goes through this kernel.
	Local
	// Emulating: a network filesystem whose Linux client implements
	// flock(2) by sending byte-range (POSIX) locks to the server, unless a
	// mount option keeps them local (NFS, SMB). Whether flock and fcntl
	// locks interact tells which of the two it is doing.
	Emulating
	// Network: another network or cluster filesystem, with its own way of
	// doing (or not doing) locks across machines.
	Network
	// ServerLocks: a network share whose byte-range locks are always
	// decided by the server (SMB as Windows uses it).
	ServerLocks
)

// typeClasses maps filesystem names, as Linux's mountinfo, the BSDs'
// f_fstypename and Windows' volume information spell them (lower-cased),
// to what they are.
var typeClasses = map[string]Class{
	// Local disks and memory.
	"ext2": Local, "ext3": Local, "ext4": Local, "xfs": Local,
	"btrfs": Local, "zfs": Local, "bcachefs": Local, "f2fs": Local,
	"jfs": Local, "reiserfs": Local, "nilfs2": Local, "tmpfs": Local,
	"ramfs": Local, "devtmpfs": Local, "overlay": Local, "overlayfs": Local,
	"vfat": Local, "msdos": Local, "exfat": Local, "ntfs": Local,
	"ntfs3": Local, "hfs": Local, "hfsplus": Local, "apfs": Local,
	"ufs": Local, "ffs": Local, "refs": Local, "fat32": Local,
	"fat": Local, "fat16": Local, "udf": Local, "iso9660": Local,
	"squashfs": Local, "erofs": Local, "ecryptfs": Local, "minix": Local,
	"hugetlbfs": Local, "msdosfs": Local, "cd9660": Local, "devfs": Local,
	"lifs": Local,
	// Network filesystems whose Linux client emulates flock(2).
	"nfs": Emulating, "nfs4": Emulating, "cifs": Emulating,
	"smb3": Emulating, "smb2": Emulating,
	// Other network, cluster and host-share filesystems.
	"smbfs": Network, "9p": Network, "ceph": Network, "afs": Network,
	"coda": Network, "ncpfs": Network, "lustre": Network, "gpfs": Network,
	"ocfs2": Network, "gfs2": Network, "beegfs": Network, "orangefs": Network,
	"virtiofs": Network, "vboxsf": Network, "prl_fs": Network, "hostfs": Network,
	"afpfs": Network, "webdav": Network, "glusterfs": Network, "drvfs": Network,
}

// fuseClasses classifies FUSE subtypes. A FUSE filesystem not listed is
// treated as unknown: it may keep its data anywhere.
var fuseClasses = map[string]Class{
	"sshfs": Network, "s3fs": Network, "rclone": Network, "gcsfuse": Network,
	"goofys": Network, "glusterfs": Network, "ceph-fuse": Network, "ceph": Network,
	"juicefs": Network, "davfs": Network, "davfs2": Network, "seaweedfs": Network,
	"mountpoint-s3": Network, "blobfuse": Network, "blobfuse2": Network,
	"lizardfs": Network, "moosefs": Network, "mfs": Network, "cvmfs2": Network,
	// These keep the data on this machine and all access goes through
	// one mount.
	"ntfs-3g": Local, "ntfs": Local, "fuse-overlayfs": Local, "squashfuse": Local,
	"lxcfs": Local, "exfat": Local,
}

// fusePassesLocks lists the FUSE subtypes whose daemons implement flock
// by asking a lock service every client shares: GlusterFS's locks
// translator, Ceph's MDS, JuiceFS's metadata engine, MooseFS's and
// LizardFS's master.
var fusePassesLocks = map[string]bool{
	"glusterfs": true, "ceph-fuse": true, "ceph": true, "juicefs": true,
	"moosefs": true, "mfs": true, "lizardfs": true,
}

// fuseServerCreate lists the FUSE subtypes whose mkdir and O_EXCL create
// are decided in one place for every client: the SFTP server's own
// filesystem (sshfs) or the cluster's metadata service. Object-store
// filesystems (s3fs, gcsfuse, goofys, rclone, mountpoint-s3, blobfuse)
// are not among them: their stores have no atomic create-if-absent for
// a directory.
var fuseServerCreate = map[string]bool{
	"sshfs": true, "glusterfs": true, "ceph-fuse": true, "ceph": true, "juicefs": true,
	"moosefs": true, "mfs": true, "lizardfs": true,
}

// CreateDecidedCentrally reports whether fs is a FUSE filesystem known to
// have mkdir and O_EXCL create decided by one server for every client
// (see fuseServerCreate).
func (fs Filesystem) CreateDecidedCentrally() bool {
	return fs.FUSE && fuseServerCreate[strings.ToLower(fs.Subtype)]
}

// hostShares are the types whose guest-side kernel keeps locks to itself:
// see the package documentation.
var hostShares = map[string]bool{
	"9p": true, "vboxsf": true, "prl_fs": true, "hostfs": true, "virtiofs": true, "drvfs": true,
}

// lockOptions maps a filesystem type to the mount options that keep its
// locks local (local_lock is NFS's own field).
var lockOptions = map[string][]string{
	"nfs": {"nolock"}, "nfs4": {"nolock"},
	"cifs": {"nobrl"}, "smb3": {"nobrl"}, "smb2": {"nobrl"},
	"lustre": {"localflock"}, "ocfs2": {"localflocks"}, "gfs2": {"localflocks"},
}

// classify fills Network, FUSE, Known and Class from Type and Subtype.
func (fs *Filesystem) classify() {
	name := strings.ToLower(fs.Type)
	for _, prefix := range []string{"fuse.", "fuseblk."} {
		if sub, ok := strings.CutPrefix(name, prefix); ok {
			name = strings.TrimSuffix(prefix, ".")
			if fs.Subtype == "" {
				fs.Subtype = sub
			}
		}
	}
	var ok bool
	switch name {
	case "fuse", "fuseblk", "macfuse", "osxfuse":
		fs.FUSE = true
		fs.Class, ok = fuseClasses[strings.ToLower(fs.Subtype)]
		if !ok && name == "fuseblk" {
			// fuseblk is FUSE on a block device of this machine
			// (ntfs-3g, exfat-fuse), mounted once.
			fs.Class, ok = Local, true
		}
	default:
		fs.Class, ok = typeClasses[name]
	}
	fs.Known = ok
	fs.Network = fs.Class == Emulating || fs.Class == Network
}

// baseType is the type without a FUSE subtype, lower-cased: "fuse" for
// "fuse.sshfs", "nfs4".
func (fs Filesystem) baseType() string {
	t := strings.ToLower(fs.Type)
	if i := strings.IndexByte(t, '.'); i >= 0 {
		t = t[:i]
	}
	return t
}

// LocalLocks returns why kernel locks taken on fs may not be seen by
// processes on other machines, as a sentence, or "" when other machines
// see them (or no other machine can reach fs). See the package
// documentation for the table and the reasons.
func (fs Filesystem) LocalLocks() string {
	t := fs.baseType()
	switch {
	case fs.LocalLock == "flock" || fs.LocalLock == "all":
		return "the NFS client keeps flock locks on this machine (local_lock=" + fs.LocalLock + ")"
	case len(fs.LockOptions) > 0:
		return "the mount option " + fs.LockOptions[0] + " keeps locks on this machine"
	case fs.FUSE:
		sub := strings.ToLower(fs.Subtype)
		switch {
		case fusePassesLocks[sub]:
			return ""
		case fs.Class == Local:
			return ""
		case sub == "":
			return "a FUSE filesystem keeps flock locks in this machine's kernel, per mount, unless its daemon handles them"
		}
		return "the FUSE filesystem " + fs.Subtype + " keeps flock locks in this machine's kernel, per mount"
	case hostShares[t]:
		return "locks on a " + t + " share stay in this machine's kernel; the host and other guests do not see them"
	}
	return ""
}

// noteLockOptions records in fs.LockOptions which of the options that keep
// locks local for fs's type appear in the comma-separated options.
func (fs *Filesystem) noteLockOptions(options string) {
	if v := optionValue(options, "local_lock"); v != "" && strings.HasPrefix(fs.baseType(), "nfs") {
		fs.LocalLock = v
	}
	for _, want := range lockOptions[fs.baseType()] {
		for _, o := range strings.Split(options, ",") {
			if o == want {
				fs.LockOptions = append(fs.LockOptions, o)
			}
		}
	}
}

// optionValue returns the value of key=value in a comma-separated list.
func optionValue(options, key string) string {
	for _, o := range strings.Split(options, ",") {
		if v, ok := strings.CutPrefix(o, key+"="); ok {
			return v
		}
	}
	return ""
}

// String names the filesystem for a message: "ext4", "fuse.sshfs",
// "nfs4 (local_lock=flock)", "fuse (mirroring /srv/data)".
func (fs Filesystem) String() string {
	name := fs.Type
	if name == "" {
		name = "an unknown filesystem"
		if fs.Magic != "" {
			name += " (type " + fs.Magic + ")"
		}
	}
	if fs.FUSE && fs.Subtype != "" && !strings.Contains(name, ".") {
		name += "." + fs.Subtype
	}
	var notes []string
	if fs.LocalLock != "" {
		notes = append(notes, "local_lock="+fs.LocalLock)
	}
	notes = append(notes, fs.LockOptions...)
	if fs.FUSE && fs.Subtype == "" && strings.HasPrefix(fs.Source, "/") {
		// bindfs and its kin name no subtype; what they mirror says
		// what they are.
		notes = append(notes, "source "+fs.Source)
	}
	if len(notes) > 0 {
		name += " (" + strings.Join(notes, ", ") + ")"
	}
	return name
}

// Describe returns the Filesystem that a mount of type typ (as mountinfo
// spells it: "nfs4", "fuse.sshfs") from source with the given
// comma-separated mount options is, classified. Stat does the same with
// what it finds; tests use Describe to stand for filesystems they cannot
// mount.
func Describe(typ, source, options string) Filesystem {
	fs := Filesystem{Type: typ, Source: source}
	fs.noteLockOptions(options)
	fs.classify()
	return fs
}
