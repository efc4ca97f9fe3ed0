package fsinfo

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

// Linux statfs f_type values that LocalLocksAt tells apart.
const (
	magicNFS    = 0x6969
	magicCIFS   = 0xff534d42
	magicSMB2   = 0xfe534d42
	magicSMBFS  = 0x517b
	magicFUSE   = 0x65735546
	magicLustre = 0x0bd00bd0
	magicOCFS2  = 0x7461636f
	magicGFS2   = 0x01161970
)

// needsMountinfo says for which magic numbers statfs alone cannot answer
// LocalLocksAt: the type's mount options (NFS, SMB, the cluster
// filesystems) or the FUSE daemon's name decide.
func needsMountinfo(magic int64) bool {
	switch magic {
	case magicNFS, magicCIFS, magicSMB2, magicSMBFS, magicFUSE, magicLustre, magicOCFS2, magicGFS2:
		return true
	}
	return false
}
