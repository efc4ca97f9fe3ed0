package proc

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseKernelLocks(t *testing.T) {
	text := `1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF
1: -> FLOCK  ADVISORY  WRITE 4343 fd:01:1234 0 EOF
2: OFDLCK ADVISORY  READ  -1 00:2b:77 1048577 1048577
3: POSIX  ADVISORY  WRITE 99 103:02:5 0 EOF
garbage
4: FLOCK  ADVISORY  WRITE x fd:01:1 0 EOF
`
	got := parseKernelLocks(strings.NewReader(text))
	want := []KernelLock{
		{Kind: "FLOCK", Write: true, PID: 4242, Major: 0xfd, Minor: 1, Inode: 1234},
		{Kind: "FLOCK", Write: true, Blocked: true, PID: 4343, Major: 0xfd, Minor: 1, Inode: 1234},
		{Kind: "OFDLCK", PID: -1, Major: 0, Minor: 0x2b, Inode: 77},
		{Kind: "POSIX", Write: true, PID: 99, Major: 0x103, Minor: 2, Inode: 5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parseKernelLocks:\n got %+v\nwant %+v", got, want)
	}
}

func TestKernelLocksListsOurFlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	locks, err := KernelLocks()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range locks {
		if l.Kind == "FLOCK" && !l.Write && !l.Blocked && l.PID == os.Getpid() &&
			l.Major == unix.Major(uint64(st.Dev)) && l.Minor == unix.Minor(uint64(st.Dev)) && l.Inode == st.Ino {
			return
		}
	}
	t.Fatalf("our shared flock on %s is not in /proc/locks: %+v", path, locks)
}
