package cli

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// cycleScript is the command of one `hold run` of a cycle: say that the
// outer lock is held (touch ready/I), wait until all n are, then take the
// next lock with the inner command (hold run, or flock(1)).
func cycleScript(i, n int, inner string) string {
	return fmt.Sprintf(`touch ready/%d; while [ "$(ls ready | wc -l)" -lt %d ]; do sleep 0.01; done; %s`, i, n, inner)
}

// runAll starts every command in dir and returns their exit statuses and
// stderr, waiting at most bound for them.
func runAll(t *testing.T, dir string, bound time.Duration, cmds [][]string) ([]int, []string) {
	t.Helper()
	var procs []*exec.Cmd
	var errs []*strings.Builder
	for _, c := range cmds {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir = dir
		b := new(strings.Builder)
		cmd.Stderr = b
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill() })
		procs, errs = append(procs, cmd), append(errs, b)
	}
	codes := make([]int, len(procs))
	outs := make([]string, len(procs))
	done := make(chan int)
	for i, p := range procs {
		go func() { p.Wait(); done <- i }()
	}
	timeout := time.After(bound)
	for range procs {
		select {
		case i := <-done:
			codes[i], outs[i] = procs[i].ProcessState.ExitCode(), errs[i].String()
		case <-timeout:
			t.Fatalf("the commands did not finish within %v", bound)
		}
	}
	return codes, outs
}

// TestRunCycle: `hold run` commands that each hold one lock while their
// command takes the next one, in a ring: exactly one fails with exit 70
// and a message naming every lock, and the others complete.
func TestRunCycle(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			dir := t.TempDir()
			runIn(t, dir, nil, "mkdir", "ready")
			var cmds [][]string
			for i := range n {
				next := fmt.Sprintf("l%d", (i+1)%n)
				cmds = append(cmds, []string{holdBin, "run", fmt.Sprintf("l%d", i), "--", "sh", "-c",
					cycleScript(i, n, holdBin+" run "+next+" -- true")})
			}
			start := time.Now()
			codes, outs := runAll(t, dir, 60*time.Second, cmds)
			t.Logf("%d hold runs: exits %v in %v", n, codes, time.Since(start))
			failed := -1
			for i, c := range codes {
				switch {
				case c == exitDeadlock && failed < 0:
					failed = i
				case c != 0:
					t.Errorf("hold run %d: exit %d, stderr %q", i, c, outs[i])
				}
			}
			if failed < 0 {
				t.Fatalf("no hold run reported the deadlock: exits %v", codes)
			}
			for i := range n {
				if l := fmt.Sprintf("l%d.lock", i); !strings.Contains(outs[failed], l) {
					t.Errorf("the deadlock message does not name %s: %s", l, outs[failed])
				}
			}
			if !strings.Contains(outs[failed], "deadlock") || !strings.Contains(outs[failed], "which waits for") {
				t.Errorf("the deadlock message does not describe the cycle: %s", outs[failed])
			}
		})
	}
}

// TestRunCycleThroughFlock: the same ring, where one side is flock(1)
// holding its lock while another flock(1) waits: hold cannot see that
// wait, so the cycle is never claimed; both sides time out instead.
func TestRunCycleThroughFlock(t *testing.T) {
	flock := testenv.LookPath(t, "flock", "a cycle through flock(1)'s wait")
	dir := t.TempDir()
	runIn(t, dir, nil, "mkdir", "ready")
	cmds := [][]string{
		{holdBin, "run", "a", "--", "sh", "-c", cycleScript(0, 2, holdBin+" run -w 4 b -- true")},
		{flock, filepath.Join(dir, "b.lock"), "sh", "-c", cycleScript(1, 2, flock+" -w 4 a.lock true")},
	}
	codes, outs := runAll(t, dir, 60*time.Second, cmds)
	for i, c := range codes {
		if c == exitDeadlock || strings.Contains(outs[i], "deadlock") {
			t.Errorf("command %d claimed a deadlock it cannot see: exit %d, stderr %q", i, c, outs[i])
		}
	}
	if codes[0] != exitConflict && codes[1] != 1 {
		t.Errorf("exits %v, want a timed-out wait on either side: %q", codes, outs)
	}
}

// TestAgentCycle: two agents (as two clients would have) each hold one
// lock and ask for the other's: exactly one request fails with EDEADLK
// naming both locks, and once its client releases what it holds, the
// other's is granted.
func TestAgentCycle(t *testing.T) {
	dir := t.TempDir()
	agents := []*agentClient{startAgent(t, holdBin, dir), startAgent(t, holdBin, dir)}
	locks := []string{"a", "b"}
	held := make([]any, 2)
	for i, c := range agents {
		held[i] = wantOK(t, c.request(fmt.Sprintf(`{"id":1,"op":"acquire","target":%q}`, locks[i])))["lock"]
	}
	for i, c := range agents {
		c.send(fmt.Sprintf(`{"id":2,"op":"acquire","target":%q}`, locks[1-i]))
	}
	replies := make(chan int, 2)
	got := make([]map[string]any, 2)
	for i, c := range agents {
		go func() { got[i] = c.reply(2); replies <- i }()
	}
	first := <-replies
	msg := wantCode(t, got[first], "EDEADLK")
	t.Log(msg)
	for _, l := range []string{"a.lock", "b.lock"} {
		if !strings.Contains(msg, l) {
			t.Errorf("the deadlock message does not name %s: %s", l, msg)
		}
	}
	wantOK(t, agents[first].request(fmt.Sprintf(`{"id":3,"op":"release","lock":%v}`, held[first])))
	second := <-replies
	wantOK(t, got[second])
}
