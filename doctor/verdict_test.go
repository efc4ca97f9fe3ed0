package doctor

import (
	"strings"
	"testing"

	"github.com/hold-dev/hold/internal/fsinfo"
)

// passing returns a report in which every probe passed, on fs, as seen on
// goos.
func passing(goos string, fs fsinfo.Filesystem, interact *bool) *Report {
	r := &Report{OS: goos, fs: fs, Protocol: "flock", FlockFcntlInteract: interact}
	for _, name := range []string{ProbeFilesystem, ProbeLockExclusive, ProbeLockShared, ProbeFlockFcntl, ProbeLockExit,
		ProbeMkdir, ProbeCreateExcl, ProbeRename, ProbeNotify, ProbeClock} {
		r.Probes = append(r.Probes, Probe{Name: name, Result: Pass})
	}
	return r
}

func named(typ string) fsinfo.Filesystem { return fsinfo.Describe(typ, "", "") }

func TestDecide(t *testing.T) {
	yes, no := true, false
	share := fsinfo.Filesystem{Type: "NTFS", Network: true, Known: true, Class: fsinfo.ServerLocks}
	darwinNFS := named("nfs")
	cases := []struct {
		name  string
		r     *Report
		flock Verdict
		dir   Verdict
	}{
		{"linux ext4", passing("linux", named("ext4"), &no), Safe, Safe},
		{"windows share", passing("windows", share, nil), Safe, Safe},
		{"darwin nfs", passing("darwin", darwinNFS, &yes), Unknown, Safe},
		{"linux nfs emulated", passing("linux", named("nfs4"), &yes), Safe, Safe},
		{"linux nfs interaction unmeasured", passing("linux", named("nfs4"), nil), Unknown, Safe},
	}
	for _, c := range cases {
		decide(c.r)
		if got := c.r.Assessment("flock").Verdict; got != c.flock {
			t.Errorf("%s: flock %s (%s), want %s", c.name, got, c.r.Assessment("flock").Reason, c.flock)
		}
		if got := c.r.Assessment("dir").Verdict; got != c.dir {
			t.Errorf("%s: dir %s (%s), want %s", c.name, got, c.r.Assessment("dir").Reason, c.dir)
		}
	}

	// A probe that did not run, or could not be carried out, leaves the
	// verdict open; a probe that failed closes it.
	r := passing("linux", named("ext4"), &no)
	r.Probes[1].Result = Error
	r.Probes[1].Detail = "permission denied"
	decide(r)
	if r.Verdict != Unknown || !strings.Contains(r.Summary, "permission denied") {
		t.Errorf("error: %s %q", r.Verdict, r.Summary)
	}
	r = passing("linux", named("ext4"), &no)
	r.Probes = r.Probes[:1]
	decide(r)
	if r.Verdict != Unknown {
		t.Errorf("missing probes: %s", r.Verdict)
	}
	r = passing("linux", named("ext4"), &no)
	r.Probes[4].Result = Fail
	r.Probes[4].Detail = "the lock of a process that exited stayed held"
	decide(r)
	if r.Verdict != Unsafe || r.Recommended != "dir" {
		t.Errorf("failed: %s, recommended %q", r.Verdict, r.Recommended)
	}
	// Shared locks that exclude each other are only a warning.
	r = passing("linux", named("ext4"), &no)
	r.Probes[2].Result = Warn
	decide(r)
	if r.Verdict != Safe || !strings.Contains(r.Summary, "warnings: lock-shared") {
		t.Errorf("warned: %s %q", r.Verdict, r.Summary)
	}
}
