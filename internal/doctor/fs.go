package doctor

import "strings"

// Filesystem describes the filesystem that holds the checked directory.
type Filesystem struct {
	// Type is the filesystem's name as the OS reports it: "ext4", "tmpfs",
	// "nfs4", "fuse.sshfs", "apfs", "NTFS". Empty when it could not be
	// found out.
	Type string `json:"type"`
	// Magic is Linux's statfs f_type, in hex ("0xef53"); empty elsewhere.
	Magic string `json:"magic,omitempty"`
	// Subtype is the FUSE subtype ("sshfs" for "fuse.sshfs"), when known.
	Subtype string `json:"subtype,omitempty"`
	// Source is what is mounted: a device, "server:/export", "//host/share".
	Source string `json:"source,omitempty"`
	// Mount is the mount point that contains the directory, when known.
	Mount string `json:"mount,omitempty"`
	// LocalLock is the NFS mount option local_lock (none, flock, posix,
	// all) on Linux: with "flock" or "all" the client keeps flock(2) locks
	// to itself, so other hosts never see them.
	LocalLock string `json:"local_lock,omitempty"`
	// Network is true for a filesystem whose data other machines can
	// reach: NFS, SMB, 9P, Ceph, a FUSE filesystem backed by a remote store.
	Network bool `json:"network"`
	// FUSE is true for a filesystem in user space.
	FUSE bool `json:"fuse"`
	// Known is true when the type is in doctor's tables, so Network and
	// FUSE can be trusted; for an unknown type they are guesses.
	Known bool `json:"known"`

	// cls is what doctor makes of the type, for the verdict.
	cls class
}

// class is what doctor knows about a filesystem type.
type class int

const (
	classUnknown class = iota
	// classLocal: the data lives on this machine and every process that
	// reaches it goes through this kernel.
	classLocal
	// classEmulating: a network filesystem whose Linux client implements
	// flock(2) by sending byte-range (POSIX) locks to the server, unless a
	// mount option keeps them local (NFS, SMB). Whether flock and fcntl
	// locks interact tells which of the two it is doing.
	classEmulating
	// classNetwork: another network or cluster filesystem, with its own
	// way of doing (or not doing) locks across machines.
	classNetwork
	// classServerLocks: a network share whose byte-range locks are always
	// decided by the server (SMB as Windows uses it).
	classServerLocks
)

// typeClasses maps filesystem names, as Linux's mountinfo, the BSDs'
// f_fstypename and Windows' volume information spell them (lower-cased),
// to what they are.
var typeClasses = map[string]class{
	// Local disks and memory.
	"ext2": classLocal, "ext3": classLocal, "ext4": classLocal, "xfs": classLocal,
	"btrfs": classLocal, "zfs": classLocal, "bcachefs": classLocal, "f2fs": classLocal,
	"jfs": classLocal, "reiserfs": classLocal, "nilfs2": classLocal, "tmpfs": classLocal,
	"ramfs": classLocal, "devtmpfs": classLocal, "overlay": classLocal, "overlayfs": classLocal,
	"vfat": classLocal, "msdos": classLocal, "exfat": classLocal, "ntfs": classLocal,
	"ntfs3": classLocal, "hfs": classLocal, "hfsplus": classLocal, "apfs": classLocal,
	"ufs": classLocal, "ffs": classLocal, "refs": classLocal, "fat32": classLocal,
	"fat": classLocal, "fat16": classLocal, "udf": classLocal, "iso9660": classLocal,
	"squashfs": classLocal, "erofs": classLocal, "ecryptfs": classLocal, "minix": classLocal,
	"hugetlbfs": classLocal, "msdosfs": classLocal, "cd9660": classLocal, "devfs": classLocal,
	"lifs": classLocal,
	// Network filesystems whose Linux client emulates flock(2).
	"nfs": classEmulating, "nfs4": classEmulating, "cifs": classEmulating,
	"smb3": classEmulating, "smb2": classEmulating,
	// Other network, cluster and host-share filesystems.
	"smbfs": classNetwork, "9p": classNetwork, "ceph": classNetwork, "afs": classNetwork,
	"coda": classNetwork, "ncpfs": classNetwork, "lustre": classNetwork, "gpfs": classNetwork,
	"ocfs2": classNetwork, "gfs2": classNetwork, "beegfs": classNetwork, "orangefs": classNetwork,
	"virtiofs": classNetwork, "vboxsf": classNetwork, "prl_fs": classNetwork, "hostfs": classNetwork,
	"afpfs": classNetwork, "webdav": classNetwork, "glusterfs": classNetwork, "drvfs": classNetwork,
}

// fuseClasses classifies FUSE subtypes. A FUSE filesystem not listed is
// treated as unknown: it may keep its data anywhere.
var fuseClasses = map[string]class{
	"sshfs": classNetwork, "s3fs": classNetwork, "rclone": classNetwork, "gcsfuse": classNetwork,
	"goofys": classNetwork, "glusterfs": classNetwork, "ceph-fuse": classNetwork, "ceph": classNetwork,
	"juicefs": classNetwork, "davfs": classNetwork, "davfs2": classNetwork, "seaweedfs": classNetwork,
	"mountpoint-s3": classNetwork, "blobfuse": classNetwork, "blobfuse2": classNetwork,
	"lizardfs": classNetwork, "moosefs": classNetwork, "mfs": classNetwork, "cvmfs2": classNetwork,
	// These keep the data on this machine and all access goes through
	// one mount.
	"ntfs-3g": classLocal, "ntfs": classLocal, "fuse-overlayfs": classLocal, "squashfuse": classLocal,
	"lxcfs": classLocal, "exfat": classLocal,
}

// magicNames names Linux statfs f_type values, for when mountinfo cannot
// be read (it gives the exact name: ext2, ext3 and ext4 share one magic).
var magicNames = map[int64]string{
	0xef53: "ext4", 0x58465342: "xfs", 0x9123683e: "btrfs", 0x2fc12fc1: "zfs",
	0xca451a4e: "bcachefs", 0xf2f52010: "f2fs", 0x3153464a: "jfs", 0x52654973: "reiserfs",
	0x3434: "nilfs2", 0x01021994: "tmpfs", 0x858458f6: "ramfs", 0x794c7630: "overlay",
	0x4d44: "vfat", 0x2011bab0: "exfat", 0x5346544e: "ntfs", 0x7366746e: "ntfs3",
	0x4244: "hfs", 0x482b: "hfsplus", 0x15013346: "udf", 0x9660: "iso9660",
	0x73717368: "squashfs", 0xe0f5e1e2: "erofs", 0xf15f: "ecryptfs", 0x958458f6: "hugetlbfs",
	0x6969: "nfs", 0xff534d42: "cifs", 0xfe534d42: "smb3", 0x517b: "smbfs",
	0x01021997: "9p", 0x00c36400: "ceph", 0x5346414f: "afs", 0x6b414653: "afs",
	0x73757245: "coda", 0x564c: "ncpfs", 0x0bd00bd0: "lustre", 0x47504653: "gpfs",
	0x7461636f: "ocfs2", 0x01161970: "gfs2", 0x19830326: "beegfs", 0x13661366: "orangefs",
	0x786f4256: "vboxsf", 0x7c7c6673: "prl_fs", 0x00c0ffee: "hostfs",
	0x65735546: "fuse",
}

// classify fills Network, FUSE, Known and the class from Type and
// Subtype.
func (fs *Filesystem) classify() {
	name := strings.ToLower(fs.Type)
	for _, prefix := range []string{"fuse.", "fuseblk."} {
		if sub, ok := strings.CutPrefix(name, prefix); ok {
			name = "fuse"
			if fs.Subtype == "" {
				fs.Subtype = sub
			}
		}
	}
	var ok bool
	switch name {
	case "fuse", "fuseblk", "macfuse", "osxfuse":
		fs.FUSE = true
		fs.cls, ok = fuseClasses[strings.ToLower(fs.Subtype)]
	default:
		fs.cls, ok = typeClasses[name]
	}
	fs.Known = ok
	fs.Network = fs.cls == classEmulating || fs.cls == classNetwork
}

// String names the filesystem for the one-line verdict: "ext4",
// "fuse.sshfs", "nfs4 (local_lock=flock)".
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
	if fs.LocalLock != "" {
		name += " (local_lock=" + fs.LocalLock + ")"
	}
	return name
}
