package fsinfo

import (
	"os"
	"testing"
)

func TestParseMountinfo(t *testing.T) {
	cases := []struct {
		line string
		want mountEntry
		ok   bool
	}{
		{"36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue",
			mountEntry{dev: "98:0", point: "/mnt2", fstype: "ext3", source: "/dev/root", options: "rw,errors=continue"}, true},
		// No optional fields; an escaped space in the mount point.
		{`120 27 0:52 / /mnt/my\040share rw,relatime - nfs4 srv:/export rw,vers=4.2,local_lock=none,addr=10.0.0.1`,
			mountEntry{dev: "0:52", point: "/mnt/my share", fstype: "nfs4", source: "srv:/export", options: "rw,vers=4.2,local_lock=none,addr=10.0.0.1"}, true},
		// Several optional fields.
		{"50 27 0:60 / /home/u/remote rw,nosuid shared:7 master:3 - fuse.sshfs u@h:/ rw,user_id=1000",
			mountEntry{dev: "0:60", point: "/home/u/remote", fstype: "fuse.sshfs", source: "u@h:/", options: "rw,user_id=1000"}, true},
		{"garbage", mountEntry{}, false},
		{"1 2 3:4 / /x rw - ext4", mountEntry{}, false},
	}
	for _, c := range cases {
		got, ok := parseMountinfo(c.line)
		if ok != c.ok || got != c.want {
			t.Errorf("parseMountinfo(%q) = %+v, %v; want %+v, %v", c.line, got, ok, c.want, c.ok)
		}
	}
	if got := optionValue("rw,vers=3,local_lock=all,addr=1", "local_lock"); got != "all" {
		t.Errorf("optionValue: %q", got)
	}
	if !within("/a/b", "/a") || within("/ab", "/a") || !within("/a", "/a") || !within("/x", "/") {
		t.Error("within is wrong")
	}
}

// TestStatFilesystem identifies real filesystems of this machine: the
// root of a test's temporary directory, and /dev/shm (tmpfs) where it
// exists.
func TestStatFilesystem(t *testing.T) {
	fs, err := Stat(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if fs.Type == "" || fs.Magic == "" || fs.Mount == "" {
		t.Errorf("incomplete: %+v", fs)
	}
	t.Logf("temp dir: %+v", fs)
	if _, err := os.Stat("/dev/shm"); err == nil {
		fs, err := Stat("/dev/shm")
		if err != nil {
			t.Fatal(err)
		}
		if fs.Type != "tmpfs" || fs.Magic != "0x1021994" || !fs.Known || fs.Network || fs.Class != Local {
			t.Errorf("/dev/shm: %+v", fs)
		}
	}
	if _, err := Stat("/no/such/dir"); err == nil {
		t.Error("Stat of a missing directory succeeded")
	}
}

// TestLocalLocksOf: a lock file on the test's temporary directory and on
// /dev/shm (tmpfs) is on a filesystem whose kernel locks nobody else can
// miss. (FUSE mounts are checked end to end by internal/cli's bindfs
// tests.)
func TestLocalLocksOf(t *testing.T) {
	dirs := []string{t.TempDir()}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		dirs = append(dirs, "/dev/shm")
	}
	for _, dir := range dirs {
		f, err := os.CreateTemp(dir, "lock-")
		if err != nil {
			t.Fatal(err)
		}
		fs, reason, err := LocalLocksOf(f)
		f.Close()
		os.Remove(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		if fs.Network || fs.FUSE {
			t.Skipf("%s is on %s, not a local filesystem", dir, fs)
		}
		if reason != "" {
			t.Errorf("%s (%s): %q, want nothing", dir, fs, reason)
		}
	}
}
