package atomicfile

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/proc"
)

func TestTempNamesRoundTrip(t *testing.T) {
	target := filepath.Join(t.TempDir(), "hooks.json")
	f, err := createTemp(OS{}, target, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	self := proc.Self()
	host, pid, start, ok := tempCreator(target, filepath.Base(f.Name()))
	if !ok || host != hostTag(self.Host) || pid != self.PID || start != self.ProcStart {
		t.Fatalf("temp name %q parsed as %q %d %d %v", f.Name(), host, pid, start, ok)
	}
	for _, name := range []string{
		"hooks.json", ".hooks.json.hold-x.tmp", ".other.json.hold-00000000-1-2-0123456789ab.tmp",
		".hooks.json.hold-00000000-1-2-0123456789ab", ".hooks.json.hold-00000000-0-2-0123456789ab.tmp",
	} {
		if _, _, _, ok := tempCreator(target, name); ok {
			t.Errorf("%q taken for a temp file of hooks.json", name)
		}
	}
}

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) int {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// tempName is the name createTemp gives a temp file of target made by
// process pid of this host (start time 0: unknown).
func tempName(t *testing.T, target string, pid int) string {
	t.Helper()
	return fmt.Sprintf("%s%s-%d-0-0123456789ab%s", tempPrefix(target), hostTag(proc.Self().Host), pid, tempSuffix)
}

func TestCleanStale(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "f")
	self := proc.Self()
	me := hostTag(self.Host)
	name := func(host string, pid int, start uint64) string {
		return filepath.Join(dir, fmt.Sprintf(".f.hold-%s-%d-%d-0123456789ab.tmp", host, pid, start))
	}
	dead := name(me, deadPID(t), 0)
	reused := name(me, self.PID, self.ProcStart+1) // our pid, another process's start time
	live := name(me, self.PID, self.ProcStart)
	foreignNew := name("ffffffff", 1, 0)
	foreignOld := name("fffffffe", 1, 0)
	lookalike := filepath.Join(dir, ".f.hold-mine.tmp")
	for _, p := range []string{dead, reused, live, foreignNew, foreignOld, lookalike} {
		os.WriteFile(p, nil, 0o600)
	}
	old := time.Now().Add(-StaleAge - time.Hour)
	os.Chtimes(foreignOld, old, old)

	want := 2
	if self.ProcStart != 0 {
		want = 3 // the reused pid is recognised only where start times are known
	}
	if n := CleanStale(OS{}, target); n != want {
		t.Errorf("removed %d, want %d", n, want)
	}
	for p, keep := range map[string]bool{dead: false, foreignOld: false, live: true, foreignNew: true, lookalike: true} {
		_, err := os.Stat(p)
		if kept := err == nil; kept != keep {
			t.Errorf("%s: kept=%v, want %v", filepath.Base(p), kept, keep)
		}
	}
}

// CleanStale touches regular files only, and a directory it cannot read
// is no error: cleanup is best effort.
func TestCleanStaleLeavesOthers(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "f")
	asDir := filepath.Join(dir, tempName(t, target, deadPID(t)))
	if err := os.Mkdir(asDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if n := CleanStale(OS{}, target); n != 0 {
		t.Errorf("removed %d, want 0", n)
	}
	if _, err := os.Stat(asDir); err != nil {
		t.Errorf("a directory with a temp file's name was removed: %v", err)
	}
	if n := CleanStale(OS{}, filepath.Join(dir, "missing", "f")); n != 0 {
		t.Errorf("removed %d in a missing directory", n)
	}
}

func TestIDName(t *testing.T) {
	f := filepath.Join(t.TempDir(), "passwd")
	os.WriteFile(f, []byte("# comment:x:7:\nroot:x:0:0:root:/root:/bin/sh\n\nalice:x:1000:1000::/home/alice:/bin/sh\nbroken\n"), 0o644)
	for id, want := range map[int]string{0: "root", 1000: "alice", 7: "", 42: ""} {
		if got := idName(f, id); got != want {
			t.Errorf("idName(%d) = %q, want %q", id, got, want)
		}
	}
	if got := idName(filepath.Join(t.TempDir(), "none"), 0); got != "" {
		t.Errorf("idName of a missing file = %q, want \"\"", got)
	}
}
