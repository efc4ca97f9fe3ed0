package holdtest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/holdtest"
)

// noLock is a protocol that locks nothing: every acquisition succeeds at
// once. The suite must fail it; TestSuiteFailsBrokenProtocol checks that
// it does, so that a check that cannot fail does not pass for one that
// works.
type noLock struct{}

func (noLock) Name() string { return "nolock" }
func (noLock) Acquire(ctx context.Context, req *hold.Request) (hold.Handle, error) {
	return &noHandle{lost: make(chan struct{})}, nil
}
func (noLock) TryAcquire(req *hold.Request) (hold.Handle, error) {
	return &noHandle{lost: make(chan struct{})}, nil
}
func (noLock) Inspect(path string) (*hold.Status, error) {
	return &hold.Status{Path: path, Protocol: "nolock", State: hold.Free}, nil
}

type noHandle struct {
	once sync.Once
	lost chan struct{}
}

func (*noHandle) Fence() uint64           { return 0 }
func (*noHandle) Owner() *hold.Owner      { return &hold.Owner{PID: os.Getpid()} }
func (h *noHandle) Lost() <-chan struct{} { return h.lost }
func (*noHandle) Check() error            { return nil }
func (h *noHandle) Release() error        { return nil }

var broken = holdtest.Subject{
	Name: "broken",
	Options: func() ([]hold.Option, func(), error) {
		return []hold.Option{hold.WithProtocol(noLock{})}, nil, nil
	},
}

func TestConformanceBroken(t *testing.T) {
	if os.Getenv("HOLDTEST_RUN_BROKEN") != "1" {
		t.Skip("run by TestSuiteFailsBrokenProtocol, which expects it to fail")
	}
	holdtest.Run(t, broken)
}

// The suite fails a protocol that does not lock, in the checks that
// such a protocol breaks.
func TestSuiteFailsBrokenProtocol(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestConformanceBroken$", "-test.v")
	cmd.Env = append(os.Environ(), "HOLDTEST_RUN_BROKEN=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a protocol that locks nothing:\n%s", out)
	}
	for _, check := range []string{"Exclusion", "TryBusy", "WaitEnds", "ReleaseIdempotent", "Tokens", "Inspect", "Crash"} {
		if !strings.Contains(string(out), "--- FAIL: TestConformanceBroken/"+check) {
			t.Errorf("the check %s passed a protocol that locks nothing", check)
		}
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}
