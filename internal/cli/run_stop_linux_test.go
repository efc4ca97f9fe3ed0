package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The commands whose stopping the tests check. Each writes a line to log
// every 50ms until stopped, after touching ready.
var stopCommands = []struct {
	name, script string
	ignoresTerm  bool
}{
	{"obeys SIGTERM", `touch ready; while :; do date +%s%N >> log; sleep 0.05; done`, false},
	{"ignores SIGTERM", `trap '' TERM; touch ready; while :; do date +%s%N >> log; sleep 0.05; done`, true},
	// The writer is a grandchild of hold: killing sh alone orphans it.
	{"grandchild writer", `sh -c 'touch ready; while :; do date +%s%N >> log; sleep 0.05; done'; echo done`, false},
}

// startMarked starts hold with args in dir, every process it starts
// carrying marker in its environment (see startMarkedCmd).
func startMarked(t *testing.T, dir, marker string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	return startMarkedCmd(t, marker, dir, nil, append([]string{holdBin}, args...)...)
}

// markedAlive lists the live (not zombie) processes whose environment
// holds marker.
func markedAlive(marker string) []int {
	want := []byte("HOLD_TEST_STOP=" + marker + "\x00")
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		if p, ok := readStat(pid); ok && p.state != 'Z' && p.state != 'X' {
			pids = append(pids, pid)
		}
	}
	return pids
}

// assertAllGone fails the test if any process of the command is alive, or
// if its log still grows.
func assertAllGone(t *testing.T, dir, marker string) {
	t.Helper()
	if pids := markedAlive(marker); len(pids) > 0 {
		t.Errorf("processes of the old command still alive after hold exited: %v", pids)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "log"))
	time.Sleep(300 * time.Millisecond)
	after, _ := os.ReadFile(filepath.Join(dir, "log"))
	if len(after) != len(before) {
		t.Errorf("the old command's log still grows after hold exited: %d bytes, then %d", len(before), len(after))
	}
}

// TestRunLostStopsWholeCommand: a kernel lock lost while `hold run` holds
// it (its file removed) stops every process of the command, a grandchild
// and one that ignores SIGTERM included, before hold exits 65; the one
// that ignores SIGTERM is killed (SIGKILL) once --kill-after has passed.
func TestRunLostStopsWholeCommand(t *testing.T) {
	t.Parallel()
	for _, c := range stopCommands {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			marker := fmt.Sprintf("lost-%d-%d", os.Getpid(), time.Now().UnixNano())
			grace := 5 * time.Second
			if c.ignoresTerm {
				grace = time.Second
			}
			holder, stderr := startMarked(t, dir, marker, "run", "--kill-after", grace.String(), "T", "-c", c.script)
			waitFor(t, filepath.Join(dir, "ready"))
			removed := time.Now()
			if err := os.Remove(filepath.Join(dir, "T.lock")); err != nil {
				t.Fatal(err)
			}
			code := waitExit(t, holder)
			took := time.Since(removed)
			msg := stderr.String()
			if code != exitLockError {
				t.Errorf("exit %d, want %d (lost lock): %s", code, exitLockError, msg)
			}
			assertAllGone(t, dir, marker)
			killed := strings.Contains(msg, "sending SIGKILL")
			if c.ignoresTerm {
				if !killed {
					t.Errorf("hold did not say it escalated to SIGKILL: %q", msg)
				}
				// SIGKILL comes only after the grace, so hold cannot be
				// done sooner.
				if took < grace {
					t.Errorf("hold exited %v after the loss, before the %v grace ended", took, grace)
				}
				// The loss is seen within a second (the library's look at
				// a watched kernel lock's file, lossPoll in
				// internal/flock) and SIGKILL is prompt; the bound only
				// allows for a loaded machine.
				if limit := grace + time.Second + 10*time.Second; took > limit {
					t.Errorf("hold exited %v after the loss, well after the %v grace", took, grace)
				}
			} else if killed {
				t.Errorf("hold escalated to SIGKILL for a command that obeys SIGTERM (grace %v): %q", grace, msg)
			}
			t.Logf("exit %d %v after the lock file was removed", code, took.Round(time.Millisecond))
		})
	}
}

// TestRunSIGTERMStopsWholeCommand: SIGTERM to hold reaches every process
// of the command, and what ignores it is killed after --kill-after.
func TestRunSIGTERMStopsWholeCommand(t *testing.T) {
	t.Parallel()
	for _, c := range stopCommands {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			marker := fmt.Sprintf("term-%d-%d", os.Getpid(), time.Now().UnixNano())
			holder, stderr := startMarked(t, dir, marker, "run", "--kill-after", "1s", "T", "-c", c.script)
			waitFor(t, filepath.Join(dir, "ready"))
			if err := holder.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			code := waitExit(t, holder)
			want := exitSignalBase + int(syscall.SIGTERM)
			if c.ignoresTerm {
				want = exitSignalBase + int(syscall.SIGKILL)
			}
			if code != want {
				t.Errorf("exit %d, want %d: %s", code, want, stderr.String())
			}
			assertAllGone(t, dir, marker)
		})
	}
}
