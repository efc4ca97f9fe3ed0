package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestDescriptorFormNamesKeeper: the descriptor form's lock is kept by
// the shell that lent hold the descriptor, and hold exits at once. Its
// record names that shell, and so do a busy error and status; when the
// shell is gone and a background child keeps the descriptor, the error
// and status name the child, the kernel's keeper, and say that the
// recorded pid is dead. (They named hold's pid, gone at once, without
// saying so.)
func TestDescriptorFormNamesKeeper(t *testing.T) {
	dir := t.TempDir()
	// The shell keeps descriptor 9 until told to go.
	sh := exec.Command("sh", "-c", `exec 9>F; `+holdBin+` run -n 9 || exit 1; echo $$ > ready.tmp && mv ready.tmp ready
		while [ ! -e release ]; do sleep 0.05; done`)
	sh.Dir = dir
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Process.Kill(); sh.Wait() })
	waitFor(t, filepath.Join(dir, "ready"))
	keeper, _ := strconv.Atoi(strings.TrimSpace(readFile(t, filepath.Join(dir, "ready"))))
	r := runHold(t, dir, "run", "--verbose", "-n", "--lock-file", "F", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("held by pid %d (sh -c", keeper)) || strings.Contains(r.stderr, "recorded owner") {
		t.Errorf("busy while the shell keeps the descriptor: exit %d, stderr %q; want 1, naming the shell (pid %d)", r.code, r.stderr, keeper)
	}
	var st struct {
		Holder struct {
			PID   int   `json:"pid"`
			Alive *bool `json:"alive"`
		} `json:"holder"`
		KernelPIDs []int `json:"kernel_pids"`
	}
	r = runHold(t, dir, "status", "--json", "--lock-file", "F")
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v: %q", err, r.stdout)
	}
	if st.Holder.PID != keeper || st.Holder.Alive == nil || !*st.Holder.Alive {
		t.Errorf("status: holder %+v, want pid %d, alive: %s", st.Holder, keeper, r.stdout)
	}
	os.WriteFile(filepath.Join(dir, "release"), nil, 0o644)
	if err := sh.Wait(); err != nil {
		t.Fatalf("the shell: %v", err)
	}

	// The shell exits at once; the child it started in the background
	// keeps the descriptor, and with it the lock.
	r = runIn(t, dir, nil, "sh", "-c", `exec 9>G; `+holdBin+` run -n 9 || exit 1; sleep 60 >/dev/null 2>&1 & echo $$ $!`)
	var shPID, child int
	if _, err := fmt.Sscan(r.stdout, &shPID, &child); err != nil || r.code != 0 {
		t.Fatalf("the shell: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	r = runHold(t, dir, "run", "--verbose", "-n", "--lock-file", "G", "--", "true")
	if want := fmt.Sprintf("held by pid %d (sleep 60), recorded owner pid %d (dead)", child, shPID); r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("busy while a child keeps the descriptor: exit %d, stderr %q; want 1 and %q", r.code, r.stderr, want)
	}
	r = runHold(t, dir, "status", "--lock-file", "G")
	for _, want := range []string{fmt.Sprintf("holder:    pid %d on host", shPID), ", dead\n", fmt.Sprintf("kernel:    lock kept by pid %d\n", child)} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status: %q lacks %q", r.stdout, want)
		}
	}
}
