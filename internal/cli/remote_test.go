//go:build unix

package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/report"
)

// A hold installed without its companion says what is missing and how to
// get it, for a network target, and runs nothing.
func TestRemoteTargetWithoutCompanion(t *testing.T) {
	dir := t.TempDir()
	lone := filepath.Join(dir, "hold")
	b, err := os.ReadFile(holdBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lone, b, 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "ran")
	cmd := exec.Command(lone, "run", "-n", "etcd://127.0.0.1:1/x", "--", "touch", marker)
	cmd.Env = append(os.Environ(), "PATH="+dir+"/nothing-here")
	out, err := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != exitExecFailed {
		t.Fatalf("exit %d (%v), want %d; output:\n%s", code, err, exitExecFailed, out)
	}
	for _, want := range []string{"hold-remote", "go install ./cmd/..."} {
		if !strings.Contains(string(out), want) {
			t.Errorf("message does not mention %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran although the lock was never taken")
	}
}

// checkRemoteHeld checks what the hold command says of a network lock at
// addr that holder (started with --field job=nightly) holds, and then of
// the lock free again once the holder is let go (the file "go" in dir):
// status names the holder, its pid and field, the protocol and each of
// wants, and never secret; status --json agrees; run -n and run -w 0.3 fail
// with exit 1, -n naming the holder, neither showing secret. It returns
// the holder's record as status --json showed it.
func checkRemoteHeld(t *testing.T, dir, addr, protocol, secret string, holder *exec.Cmd, wants ...string) *report.Status {
	t.Helper()
	r := runHold(t, dir, "status", addr)
	if r.code != 0 {
		t.Fatalf("status: exit %d: %s", r.code, r.stderr)
	}
	t.Logf("hold status %s:\n%s", addr, r.stdout)
	for _, want := range append([]string{"held exclusive", protocol, fmt.Sprintf("pid %d", holder.Process.Pid), "nightly"}, wants...) {
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
	if !rep.Held || rep.Protocol != protocol || rep.Token == 0 || rep.Holder == nil || rep.Holder.PID != holder.Process.Pid {
		t.Errorf("status --json = %+v", rep)
	}
	r = runHold(t, dir, "run", "--verbose", "-n", addr, "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "held by pid") {
		t.Errorf("run -n on a held %s lock: exit %d, stderr %q; want 1 naming the holder", protocol, r.code, r.stderr)
	}
	if strings.Contains(r.stderr, secret) {
		t.Errorf("busy error shows the password: %q", r.stderr)
	}
	if r := runHold(t, dir, "run", "-w", "0.3", addr, "--", "true"); r.code != 1 {
		t.Errorf("run -w 0.3 on a held %s lock: exit %d, stderr %q; want 1", protocol, r.code, r.stderr)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if code := waitExit(t, holder); code != 0 {
		t.Fatalf("holder exited %d", code)
	}
	r = runHold(t, dir, "status", addr)
	if r.code != exitStatusFree || !strings.Contains(r.stdout, "free") {
		t.Errorf("status after release: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return &rep
}

// checkRemoteBreak checks hold break on a network lock at addr held by a
// live `hold run`: break refuses it, naming the holder; --force removes
// it, printing the holder; the holder's `hold run` learns it lost the
// lock, says so, stops its command and exits 65; the lock is free after.
func checkRemoteBreak(t *testing.T, addr string) {
	t.Helper()
	dir := t.TempDir()
	holder, holderErr := startHold(t, dir, "run", addr, "-c", gatedCommand)
	waitFor(t, filepath.Join(dir, "ready"))
	t.Cleanup(func() { os.WriteFile(filepath.Join(dir, "go"), nil, 0o644) })

	if r := runHold(t, dir, "break", addr); r.code != 1 || !strings.Contains(r.stderr, "held by pid") {
		t.Errorf("break of a live holder: exit %d, stderr %q; want 1 naming it", r.code, r.stderr)
	}
	r := runHold(t, dir, "break", "--force", addr)
	if r.code != 0 || !strings.Contains(r.stdout, "removed") || !strings.Contains(r.stdout, fmt.Sprintf("pid %d", holder.Process.Pid)) {
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

// lsHolderAndWaiter starts a holder of target (held until the test
// creates "go" in dir) and a waiter for it, and waits until `hold ls
// prefix` lists the lock as name, of protocol, held by that holder with
// one waiter and a token. It returns the holder and the waiter, which the
// caller lets go.
func lsHolderAndWaiter(t *testing.T, dir, target, prefix, name, protocol string) (holder, waiter *exec.Cmd) {
	t.Helper()
	holder, _ = startHold(t, dir, "run", target, "-c", gatedCommand)
	waitFor(t, filepath.Join(dir, "ready"))
	waiter, _ = startHold(t, dir, "run", "-w", "60", target, "--", "true")
	deadline := time.Now().Add(hangLimit)
	for {
		got := lsJSON(t, dir, prefix)
		l, ok := got[name]
		if ok && l.Waiters != nil && *l.Waiters == 1 {
			if len(got) != 1 || l.Protocol != protocol || l.State != "held exclusive" || l.Token == 0 ||
				l.Holder == nil || l.Holder.PID != holder.Process.Pid {
				t.Fatalf("hold ls %s: %+v", prefix, got)
			}
			return holder, waiter
		}
		if time.Now().After(deadline) {
			t.Fatalf("hold ls %s never showed %s with one waiter: %+v", prefix, name, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
