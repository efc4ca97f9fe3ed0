package proc

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

func TestLockHolders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.lock")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if pids := LockHolders(f.Fd()); len(pids) != 0 {
		t.Fatalf("unlocked file: holders %v", pids)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	g, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if pids := LockHolders(g.Fd()); len(pids) != 1 || pids[0] != os.Getpid() {
		t.Fatalf("holders %v, want [%d]", pids, os.Getpid())
	}
}

func TestParseStartTime(t *testing.T) {
	line := "4242 (a) b) c) S 1 4242 4242 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 1 0 987654 1000 1 18446744073709551615"
	if v, ok := parseStartTime([]byte(line)); !ok || v != 987654 {
		t.Fatalf("parseStartTime = %d, %v; want 987654", v, ok)
	}
	for _, bad := range []string{"", "4242 (x", "4242 (x) S 1 2", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 nan"} {
		if v, ok := parseStartTime([]byte(bad)); ok {
			t.Errorf("parseStartTime(%q) = %d, want failure", bad, v)
		}
	}
	if runtime.GOOS == "linux" {
		a, ok1 := StartTime(os.Getpid())
		b, ok2 := StartTime(os.Getpid())
		if !ok1 || !ok2 || a != b || a == 0 {
			t.Fatalf("StartTime of this process: %d %v, %d %v", a, ok1, b, ok2)
		}
		if _, ok := StartTime(deadPID(t)); ok {
			t.Fatal("StartTime of an exited process")
		}
		if c := Cmdline(os.Getpid()); c == "" {
			t.Fatal("no command line for this process")
		}
	}
}
