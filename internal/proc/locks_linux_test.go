package proc

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseLockLines(t *testing.T) {
	text := `1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF
1: -> FLOCK  ADVISORY  WRITE 4343 fd:01:1234 0 EOF
2: OFDLCK ADVISORY  READ  -1 00:2b:77 1048577 1048577
3: POSIX  ADVISORY  WRITE 99 103:02:5 0 EOF
garbage
4: FLOCK  ADVISORY  WRITE x fd:01:1 0 EOF
5: FLOCK  ADVISORY  READ 7 fd:01:1234 0 EOF`
	var got []KernelLock
	for _, line := range []string{
		"1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF",
		"1: -> FLOCK  ADVISORY  WRITE 4343 fd:01:1234 0 EOF",
		"2: OFDLCK ADVISORY  READ  -1 00:2b:77 1048577 1048577",
		"3: POSIX  ADVISORY  WRITE 99 103:02:5 0 EOF",
		"garbage",
		"4: FLOCK  ADVISORY  WRITE x fd:01:1 0 EOF",
	} {
		if l, ok := parseLockLine([]byte(line)); ok {
			got = append(got, l)
		}
	}
	want := []KernelLock{
		{Kind: "FLOCK", Write: true, PID: 4242, Major: 0xfd, Minor: 1, Inode: 1234},
		{Kind: "FLOCK", Write: true, Blocked: true, PID: 4343, Major: 0xfd, Minor: 1, Inode: 1234},
		{Kind: "OFDLCK", PID: -1, Major: 0, Minor: 0x2b, Inode: 77},
		{Kind: "POSIX", Write: true, PID: 99, Major: 0x103, Minor: 2, Inode: 5},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parseLockLine:\n got %+v\nwant %+v", got, want)
	}
	tab := indexLockTable([]byte(text))
	k := FileKey{unix.Mkdev(0xfd, 1), 1234}
	if h := tab.Holders(k); !reflect.DeepEqual(h, []int{4242, 7}) {
		t.Fatalf("holders of fd:01:1234: %v, want [4242 7] (the blocked 4343 is no holder)", h)
	}
	if n := len(tab.Locks(k)); n != 3 {
		t.Fatalf("%d lines for fd:01:1234, want 3", n)
	}
	if l := tab.Locks(FileKey{unix.Mkdev(0x103, 2), 5}); l != nil {
		t.Fatalf("a POSIX lock was indexed: %+v", l)
	}
	// The same lock on two lines (the kernel's table read across a
	// change) names its holder once.
	twice := indexLockTable([]byte("1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF\n2: FLOCK  ADVISORY  WRITE 4242 fd:01:1234 0 EOF\n"))
	if h := twice.Holders(k); !reflect.DeepEqual(h, []int{4242}) {
		t.Fatalf("holders of a lock listed twice: %v, want [4242]", h)
	}
	if h := tab.Holders(FileKey{unix.Mkdev(0, 0x2b), 77}); h != nil {
		t.Fatalf("an OFD lock (pid -1) named holders %v", h)
	}
}

func TestLockTableListsOurFlock(t *testing.T) {
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
	tab, err := ReadLockTable()
	if err != nil {
		t.Fatal(err)
	}
	k := FileKey{uint64(st.Dev), st.Ino}
	for _, l := range tab.Locks(k) {
		if l.Kind == "FLOCK" && !l.Write && !l.Blocked && l.PID == os.Getpid() {
			if h := LockHolders(f.Fd()); !reflect.DeepEqual(h, []int{os.Getpid()}) {
				t.Fatalf("LockHolders: %v, want our pid", h)
			}
			return
		}
	}
	t.Fatalf("our shared flock on %s is not in /proc/locks: %+v", path, tab.Locks(k))
}

// TestShareLockTableReadsOnce checks that within ShareLockTable the table
// is read once, at the first question, and that release ends the sharing.
func TestShareLockTableReadsOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	release := ShareLockTable()
	if h := LockHolders(f.Fd()); h != nil {
		t.Fatalf("holders of a free file: %v", h)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if h := LockHolders(f.Fd()); h != nil {
		t.Fatalf("the shared table was read again: %v", h)
	}
	release()
	if h := LockHolders(f.Fd()); !reflect.DeepEqual(h, []int{os.Getpid()}) {
		t.Fatalf("after release: %v, want our pid", h)
	}
}
