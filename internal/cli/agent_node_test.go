//go:build unix

package cli

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// TestNodePackage runs the Node package's own tests (npm test in js/)
// against the hold built for these tests, and an etcd server, so that `go
// test ./...`, and with it CI, fails when they do.
func TestNodePackage(t *testing.T) {
	for _, tool := range []string{"node", "npm"} {
		testenv.LookPath(t, tool, "not installed (.ci/run installs it): the Node package's tests cannot run")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "test", "--silent")
	cmd.Dir = "../../js"
	// HOLD_TEST_ETCD lets the package's etcd test run against a server
	// inside this test (hold-remote sits beside holdBin).
	cmd.Env = append(os.Environ(), "HOLD_BIN="+holdBin, "HOLD_TEST_ETCD="+startEtcd(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm test in js/: %v\n%s", err, out)
	}
	t.Logf("npm test in js/:\n%s", out)
}
