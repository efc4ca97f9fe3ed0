package etcd_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
)

// TestRootDoesNotLinkEtcd: a program that uses only local locks must not
// link etcd's client or gRPC. The root package must never import this one.
func TestRootDoesNotLinkEtcd(t *testing.T) {
	goTool := testenv.LookPath(t, "go", "the go command is not on PATH")
	out, err := exec.Command(goTool, "list", "-deps", "github.com/hold-dev/hold").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 2 {
		t.Fatalf("go list -deps listed only %q", deps)
	}
	for _, d := range deps {
		if strings.HasPrefix(d, "go.etcd.io/") || strings.HasPrefix(d, "google.golang.org/grpc") ||
			strings.HasPrefix(d, "github.com/hold-dev/hold/etcd") {
			t.Errorf("the hold package depends on %s", d)
		}
	}
}
