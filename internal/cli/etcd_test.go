//go:build unix

package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/etcd/etcdtest"
)

// startEtcd runs an etcd server inside the test and returns its host:port.
func startEtcd(t *testing.T) string {
	t.Helper()
	c, err := etcdtest.Start(t.TempDir(), etcdtest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return strings.TrimPrefix(c.Members[0].ClientURL, "http://")
}

// TestEtcdRunManyProcesses: concurrent `hold run etcd://...` processes,
// each its own etcd client, lose no increment of a shared file.
func TestEtcdRunManyProcesses(t *testing.T) {
	const processes, runs = 8, 10
	addr := "etcd://" + startEtcd(t) + "/locks/counter"
	dir := t.TempDir()
	errs := make(chan error, processes)
	runIncrementers(dir, processes, runs, errs, "run", "--ttl", "8", addr)
	collect(t, errs, processes, 4*hangLimit)
	got := strings.TrimSpace(readFile(t, filepath.Join(dir, "counter")))
	if want := strconv.Itoa(processes * runs); got != want {
		t.Fatalf("counter = %s, want %s", got, want)
	}
}

// TestEtcdStatusBusyAndSecrets: status names the holder of an etcd lock
// and its token, -n fails with exit 1 while it is held, and the password
// given on the holder's command line never shows in status output.
func TestEtcdStatusBusyAndSecrets(t *testing.T) {
	addr := "etcd://" + startEtcd(t) + "/locks/deploy"
	dir := t.TempDir()
	const secret = "s3cret-Pa55"
	holder, _ := startHold(t, dir, "run", "--etcd-user", "deployer", "--etcd-password", secret,
		"--field", "job=nightly", addr, "-c", gatedCommand)
	waitFor(t, filepath.Join(dir, "ready"))
	t.Cleanup(func() { os.WriteFile(filepath.Join(dir, "go"), nil, 0o644) })

	checkRemoteHeld(t, dir, addr, "etcd", secret, holder, "--etcd-password ***")
	// The password from the environment works the same way.
	cmd := exec.Command(holdBin, "run", "--etcd-user", "deployer", addr, "--", "true")
	cmd.Env = append(os.Environ(), "HOLD_ETCD_PASSWORD="+secret)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("run with the password in the environment: %v: %s", err, out)
	}
}

// TestEtcdBadInput: malformed addresses and flags are usage errors,
// credentials in an address are refused without being echoed, an
// unreachable endpoint fails fast and says so, and unusable TLS files are
// reported.
func TestEtcdBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, addr := range []string{"etcd://127.0.0.1/locks/x", "etcd://127.0.0.1:2379", "etcd://127.0.0.1:2379/locks/x/", "etcd://127.0.0.1:70000/x"} {
		if r := runHold(t, dir, "run", addr, "--", "true"); r.code != exitUsage {
			t.Errorf("run %s: exit %d (%s), want %d", addr, r.code, r.stderr, exitUsage)
		}
	}
	r := runHold(t, dir, "status", "etcd://admin:hunter2@127.0.0.1:2379/locks/x")
	if r.code != exitUsage || strings.Contains(r.stderr, "hunter2") {
		t.Errorf("credentials in the address: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runHold(t, dir, "run", "--ttl", "soon", "etcd://127.0.0.1:2379/x", "--", "true"); r.code != exitUsage {
		t.Errorf("--ttl soon: exit %d, want %d", r.code, exitUsage)
	}

	port, err := etcdtest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r = runHold(t, dir, "run", fmt.Sprintf("etcd://127.0.0.1:%d/locks/x", port), "--", "true")
	if r.code != exitUnavailable || exitUnavailable == exitLockError || !strings.Contains(r.stderr, "unreachable") {
		t.Errorf("unreachable etcd: exit %d, want %d (the server is unavailable), stderr %q", r.code, exitUnavailable, r.stderr)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("unreachable etcd took %s to report", d)
	}

	missing := filepath.Join(dir, "no-such-ca.pem")
	r = runHold(t, dir, "status", "--etcd-ca", missing, "etcd://127.0.0.1:2379/locks/x")
	if r.code == 0 || !strings.Contains(r.stderr, "no-such-ca.pem") {
		t.Errorf("missing CA file: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestEtcdBreak: break refuses a live holder of an etcd lock; --force
// revokes its lease, and the holder's `hold run` learns it lost the lock,
// stops its command and exits 65.
func TestEtcdBreak(t *testing.T) {
	checkRemoteBreak(t, "etcd://"+startEtcd(t)+"/locks/stuck")
}
