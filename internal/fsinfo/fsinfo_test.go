package fsinfo

import (
	"strings"
	"testing"
)

// TestLocalLocks checks the table of filesystems whose kernel locks may
// stay on this machine, one row per reason, against the mount options
// mountinfo would show.
func TestLocalLocks(t *testing.T) {
	cases := []struct {
		typ, source, options string
		want                 string // a word of the reason; "" for none
	}{
		{"ext4", "/dev/sda1", "rw,relatime", ""},
		{"tmpfs", "tmpfs", "rw", ""},
		{"nfs4", "srv:/export", "rw,vers=4.2,local_lock=none", ""},
		{"nfs", "srv:/export", "rw,vers=3,local_lock=none", ""},
		{"nfs", "srv:/export", "rw,vers=3,local_lock=posix", ""},
		{"nfs", "srv:/export", "rw,vers=3,local_lock=flock", "local_lock=flock"},
		{"nfs", "srv:/export", "rw,vers=3,nolock,local_lock=all", "local_lock=all"},
		{"nfs", "srv:/export", "rw,vers=3,nolock", "nolock"},
		{"cifs", "//h/s", "rw,vers=3.1.1", ""},
		{"cifs", "//h/s", "rw,vers=3.1.1,nobrl", "nobrl"},
		{"lustre", "mgs@tcp:/fs", "rw,flock", ""},
		{"lustre", "mgs@tcp:/fs", "rw,localflock", "localflock"},
		{"gfs2", "/dev/vg/gfs", "rw,localflocks", "localflocks"},
		{"ocfs2", "/dev/sdb", "rw,localflocks", "localflocks"},
		{"ceph", "mon:/", "rw", ""},
		{"9p", "drvfs", "rw,aname=drvfs", "9p"},
		{"virtiofs", "share", "rw", "virtiofs"},
		{"vboxsf", "share", "rw", "vboxsf"},
		{"fuse.sshfs", "u@h:/", "rw", "sshfs"},
		{"fuse.s3fs", "s3fs", "rw", "s3fs"},
		{"fuse.rclone", "remote:", "rw", "rclone"},
		{"fuse", "/srv/base", "rw,allow_other", "FUSE"}, // bindfs
		{"fuse.glusterfs", "srv:/vol", "rw", ""},
		{"fuse.ceph-fuse", "ceph-fuse", "rw", ""},
		{"fuse.juicefs", "redis://h/1", "rw", ""},
		{"fuseblk", "/dev/sdc1", "rw", ""}, // ntfs-3g
		{"fuse.fuse-overlayfs", "fuse-overlayfs", "rw", ""},
	}
	for _, c := range cases {
		fs := Describe(c.typ, c.source, c.options)
		got := fs.LocalLocks()
		switch {
		case c.want == "" && got != "":
			t.Errorf("%s %s: %q, want nothing", c.typ, c.options, got)
		case c.want != "" && !strings.Contains(got, c.want):
			t.Errorf("%s %s: %q, want a reason naming %q", c.typ, c.options, got, c.want)
		}
	}
}

func TestString(t *testing.T) {
	fs := Describe("fuse", "/srv/base", "rw")
	if got := fs.String(); got != "fuse (source /srv/base)" {
		t.Errorf("bindfs: %q", got)
	}
	fs = Describe("nfs", "", "rw,nolock,local_lock=all")
	if got := fs.String(); got != "nfs (local_lock=all, nolock)" {
		t.Errorf("nfs: %q", got)
	}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		typ                  string
		known, network, fuse bool
		cls                  Class
	}{
		{"ext4", true, false, false, Local},
		{"NTFS", true, false, false, Local},
		{"nfs4", true, true, false, Emulating},
		{"smb3", true, true, false, Emulating},
		{"9p", true, true, false, Network},
		{"fuse.sshfs", true, true, true, Network},
		{"fuse.fuse-overlayfs", true, false, true, Local},
		{"fuseblk.ntfs-3g", true, false, true, Local},
		{"fuse.mystery", false, false, true, Unknown},
		{"weirdfs", false, false, false, Unknown},
	}
	for _, c := range cases {
		fs := Describe(c.typ, "", "")
		if fs.Known != c.known || fs.Network != c.network || fs.FUSE != c.fuse || fs.Class != c.cls {
			t.Errorf("%s: %+v", c.typ, fs)
		}
	}
}
