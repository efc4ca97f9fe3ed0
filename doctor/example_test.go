package doctor_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"
	"testing"

	"github.com/hold-dev/hold/doctor"
)

// A program checks at start-up that locks can be trusted where it keeps
// its data.
func ExampleCheck() {
	dataDir := os.TempDir()
	rep, err := doctor.Check(context.Background(), dataDir, doctor.Config{})
	if err != nil {
		log.Fatalf("cannot check %s: %v", dataDir, err)
	}
	if rep.Verdict != doctor.Safe {
		log.Fatalf("locks cannot be trusted in %s: %s", dataDir, rep.Summary)
	}
	fmt.Println(rep.Protocol, rep.Verdict)
}

// TestCheckReportOnError runs the example of the package documentation on
// a directory that does not exist: the error comes with a report whose
// verdict is unknown and whose summary says why, so the example's
// rep.Summary does not dereference nil.
func TestCheckReportOnError(t *testing.T) {
	dataDir := t.TempDir() + "/missing"
	rep, err := doctor.Check(context.Background(), dataDir, doctor.Config{})
	if err == nil {
		t.Fatal("Check of a missing directory: no error")
	}
	if rep == nil {
		t.Fatalf("Check returned a nil report with %v", err)
	}
	var msg string
	if err != nil || rep.Verdict != doctor.Safe {
		msg = fmt.Sprintf("locks cannot be trusted in %s: %v %s", dataDir, err, rep.Summary)
	}
	if rep.Verdict != doctor.Unknown || rep.Verdict.ExitStatus() != 2 {
		t.Errorf("verdict %q, want %q", rep.Verdict, doctor.Unknown)
	}
	if !strings.Contains(rep.Summary, "could not tell") || !strings.Contains(rep.Summary, "missing") {
		t.Errorf("summary %q does not say why", rep.Summary)
	}
	t.Log(msg)
}
