//go:build unix

package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/fairq"
)

// TestFairFlagQueuesInOrder: `hold run --fair` waiters started one by one
// behind a held lock run their commands in that order.
func TestFairFlagQueuesInOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, _ := holdCommand(t, dir)
	const waiters = 4
	queued := func() int {
		n, err := fairq.Waiting(filepath.Join(dir, "T.lock"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var cmds []*exec.Cmd
	for i := 0; i < waiters; i++ {
		cmd, _ := startHold(t, dir, "run", "--fair", "T", "-c", "echo "+strconv.Itoa(i)+" >> order")
		cmds = append(cmds, cmd)
		deadline := time.Now().Add(hangLimit)
		for queued() != i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("fair waiter %d never queued", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, holder); code != 0 {
		t.Fatalf("holder exited %d", code)
	}
	for i, cmd := range cmds {
		if code := waitExit(t, cmd); code != 0 {
			t.Fatalf("fair waiter %d exited %d", i, code)
		}
	}
	if got := strings.Fields(readFile(t, filepath.Join(dir, "order"))); strings.Join(got, " ") != "0 1 2 3" {
		t.Fatalf("fair waiters ran in order %v, want 0 1 2 3", got)
	}
}
