package hold_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/hold-dev/hold"
)

func TestDoctor(t *testing.T) {
	dir := t.TempDir()
	rep, err := hold.Doctor(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("Doctor left %v behind", ents)
	}
	if rep.Filesystem.Network || rep.Filesystem.FUSE || !rep.Filesystem.Known {
		t.Skipf("the test directory is not on a local filesystem: %+v", rep.Filesystem)
	}
	if rep.Verdict != hold.VerdictSafe || rep.Verdict.ExitStatus() != 0 || rep.Protocol != "flock" {
		t.Errorf("verdict %s for %s: %s", rep.Verdict, rep.Protocol, rep.Summary)
	}
	for _, p := range rep.Probes {
		// The library's check runs no second process; Windows has one
		// kind of file lock, so flock and fcntl cannot conflict there.
		maySkip := p.Name == "lock-released-on-exit" || (p.Name == "lock-flock-fcntl" && runtime.GOOS == "windows")
		if p.Result != "pass" && !(maySkip && p.Result == "skip") {
			t.Errorf("probe %s: %s (%s)", p.Name, p.Result, p.Detail)
		}
	}
}

// namedProtocol is a protocol that only has a name, to ask Doctor about a
// protocol that does not keep its locks in the filesystem.
type namedProtocol struct{ hold.Protocol }

func (namedProtocol) Name() string { return "etcd" }

func TestDoctorOtherProtocol(t *testing.T) {
	rep, err := hold.Doctor(context.Background(), t.TempDir(), hold.WithProtocol(namedProtocol{}))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Protocol != "etcd" || rep.Verdict != hold.VerdictUnknown || !strings.Contains(rep.Summary, "does not keep its locks in the filesystem") {
		t.Errorf("verdict %s for %s: %s", rep.Verdict, rep.Protocol, rep.Summary)
	}
}

func TestDoctorCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	if _, err := hold.Doctor(ctx, dir); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("Doctor left %v behind", ents)
	}
}

// A program checks at start-up that locks can be trusted where it keeps
// its data.
func ExampleDoctor() {
	dataDir := os.TempDir()
	rep, err := hold.Doctor(context.Background(), dataDir)
	if err != nil {
		log.Fatalf("cannot check %s: %v", dataDir, err)
	}
	if rep.Verdict != hold.VerdictSafe {
		log.Fatalf("locks cannot be trusted in %s: %s", dataDir, rep.Summary)
	}
	fmt.Println(rep.Protocol, rep.Verdict)
}

// TestDoctorReportOnError runs the example in Doctor's documentation on a
// directory that does not exist: the error comes with a report whose
// verdict is unknown and whose summary says why, so the example's
// rep.Summary does not dereference nil.
func TestDoctorReportOnError(t *testing.T) {
	dataDir := t.TempDir() + "/missing"
	rep, err := hold.Doctor(context.Background(), dataDir)
	if err == nil {
		t.Fatal("Doctor of a missing directory: no error")
	}
	if rep == nil {
		t.Fatalf("Doctor returned a nil report with %v", err)
	}
	var msg string
	if err != nil || rep.Verdict != hold.VerdictSafe {
		msg = fmt.Sprintf("locks cannot be trusted in %s: %v %s", dataDir, err, rep.Summary)
	}
	if rep.Verdict != hold.VerdictUnknown || rep.Verdict.ExitStatus() != 2 {
		t.Errorf("verdict %q, want %q", rep.Verdict, hold.VerdictUnknown)
	}
	if !strings.Contains(rep.Summary, "could not tell") || !strings.Contains(rep.Summary, "missing") {
		t.Errorf("summary %q does not say why", rep.Summary)
	}
	t.Log(msg)
}
