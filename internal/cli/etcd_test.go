//go:build unix

package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/etcd/etcdtest"
	"github.com/hold-dev/hold/internal/report"
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

	r := runHold(t, dir, "status", addr)
	if r.code != 0 {
		t.Fatalf("status: exit %d: %s", r.code, r.stderr)
	}
	t.Logf("hold status %s:\n%s", addr, r.stdout)
	for _, want := range []string{"held exclusive", "etcd", fmt.Sprintf("pid %d", holder.Process.Pid), "nightly", "--etcd-password ***"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout+r.stderr, secret) {
		t.Errorf("status shows the password:\n%s", r.stdout)
	}

	r = runHold(t, dir, "status", "--json", addr)
	var rep report.Status
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("status --json: %v: %q", err, r.stdout)
	}
	if !rep.Held || rep.Protocol != "etcd" || rep.Token == 0 || rep.Holder == nil || rep.Holder.PID != holder.Process.Pid {
		t.Errorf("status --json = %+v", rep)
	}

	r = runHold(t, dir, "run", "--verbose", "-n", addr, "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "held by pid") {
		t.Errorf("run -n on a held etcd lock: exit %d, stderr %q; want 1 naming the holder", r.code, r.stderr)
	}
	r = runHold(t, dir, "run", "-w", "0.3", addr, "--", "true")
	if r.code != 1 {
		t.Errorf("run -w 0.3 on a held etcd lock: exit %d, stderr %q; want 1", r.code, r.stderr)
	}

	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if code := waitExit(t, holder); code != 0 {
		t.Fatalf("holder exited %d", code)
	}
	r = runHold(t, dir, "status", addr)
	if r.code != 0 || !strings.Contains(r.stdout, "free") {
		t.Errorf("status after release: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
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
	addr := "etcd://" + startEtcd(t) + "/locks/stuck"
	dir := t.TempDir()
	holder, holderErr := startHold(t, dir, "run", addr, "-c", gatedCommand)
	waitFor(t, filepath.Join(dir, "ready"))
	t.Cleanup(func() { os.WriteFile(filepath.Join(dir, "go"), nil, 0o644) })

	if r := runHold(t, dir, "break", addr); r.code != 1 || !strings.Contains(r.stderr, "held by pid") {
		t.Errorf("break of a live holder: exit %d, stderr %q; want 1 naming it", r.code, r.stderr)
	}
	r := runHold(t, dir, "break", "--force", addr)
	if r.code != 0 || !strings.Contains(r.stdout, "removed") {
		t.Fatalf("break --force: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if code := waitExit(t, holder); code != exitLockError {
		t.Errorf("holder after break: exit %d, want %d; stderr %q", code, exitLockError, holderErr())
	}
	if !strings.Contains(holderErr(), "lost") {
		t.Errorf("holder's stderr does not say the lock was lost: %q", holderErr())
	}
	if r := runHold(t, dir, "run", "-n", addr, "--", "true"); r.code != 0 {
		t.Errorf("lock not free after break: exit %d, %s", r.code, r.stderr)
	}
}
