package cli

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// TestRunCycleBoundedLink: a ring of two hold runs whose one link ends by
// itself is no deadlock: the link is a wait with a deadline (hold run -w)
// or a hold run under timeout(1), which kills it. Nobody may exit 70;
// the bounded wait gives up, and the other then gets its lock. Before,
// the second exited 70 saying that no wait of the cycle could ever end.
func TestRunCycleBoundedLink(t *testing.T) {
	for _, name := range []string{"deadline", "timeout"} {
		t.Run(name, func(t *testing.T) {
			link := holdBin + " run -w 2.5 f2 -- true"
			if name == "timeout" {
				link = testenv.LookPath(t, "timeout", "a link under timeout(1)") + " 2.5 " + holdBin + " run f2 -- true"
			}
			dir := t.TempDir()
			runIn(t, dir, nil, "mkdir", "ready")
			codes, outs := runAll(t, dir, 60*time.Second, [][]string{
				{holdBin, "run", "f1", "--", "sh", "-c", cycleScript(0, 2, link)},
				{holdBin, "run", "f2", "--", "sh", "-c", cycleScript(1, 2, holdBin+" run f1 -- echo in")},
			})
			for i, c := range codes {
				if c == exitDeadlock || strings.Contains(outs[i], "deadlock") {
					t.Errorf("command %d claimed a deadlock through a link that ends by itself: exit %d, %q", i, c, outs[i])
				}
			}
			if codes[0] == 0 || codes[1] != 0 {
				t.Errorf("exits %v, %q: want the bounded link to give up and the other to get its lock", codes, outs)
			}
		})
	}
}

// TestRunInheritedDescriptorDeadlock: a shell locks b.lock on its
// descriptor 9 (hold run 9, the descriptor form, as flock 9 would) and
// runs hold run b, which inherits the descriptor: hold's own descriptor
// keeps the lock, so its wait can never end, and it exits 70 at once,
// naming the descriptor and the shell that keeps it too. Before, it
// waited for ever, naming itself as the holder. A shell that unlocks the
// descriptor from the background a moment later is waited for.
func TestRunInheritedDescriptorDeadlock(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	r := runIn(t, dir, nil, "sh", "-c", "exec 9>>b.lock; "+holdBin+" run 9 || exit 9; "+holdBin+" run -w 30 b -- true")
	if r.code != exitDeadlock || !strings.Contains(r.stderr, "descriptor 9") || !strings.Contains(r.stderr, "flock -u 9") {
		t.Fatalf("exit %d, stderr %q; want %d naming descriptor 9", r.code, r.stderr, exitDeadlock)
	}
	t.Logf("after %v: %s", time.Since(start), r.stderr)
	r = runIn(t, dir, nil, "sh", "-c", "exec 9>>b.lock; "+holdBin+" run 9 || exit 9; ( sleep 1; "+holdBin+" run -u 9 ) & "+holdBin+" run -w 30 b -- true; s=$?; wait; exit $s")
	if r.code != 0 {
		t.Errorf("a descriptor unlocked from the background: exit %d, stderr %q; want 0", r.code, r.stderr)
	}
	// A shell with a trap could unlock it when signalled: not certain.
	r = runIn(t, dir, nil, "sh", "-c", "trap '"+holdBin+" run -u 9' USR1; exec 9>>b.lock; "+holdBin+" run 9 || exit 9; "+holdBin+" run -w 1.5 b -- true")
	if r.code == exitDeadlock {
		t.Errorf("a shell with a trap: exit %d, stderr %q; want the wait to time out", r.code, r.stderr)
	}
}

// TestRunRandomCycles: rings of 2 to 4 hold runs, each holding its lock
// while its command takes the next one's. A near-cycle has one link that
// ends: a wait with a deadline, a hold run under timeout(1), or a holder
// that lets go (its lock is held by a background hold run that ends on
// its own, while the wait for the next lock keeps nothing): nobody may
// exit 70. A true cycle ends with exactly one 70. HOLD_TEST_LONG=1 runs
// 200 near-cycles and 50 true ones; by default 20 and 10.
func TestRunRandomCycles(t *testing.T) {
	near, true_ := 20, 10
	if os.Getenv("HOLD_TEST_LONG") == "1" {
		near, true_ = 200, 50
	}
	to := testenv.LookPath(t, "timeout", "near-cycles through timeout(1)")
	kinds := []string{"deadline", "letgo", "timeout"}
	type ring struct {
		n    int
		kind string // "" for a true cycle
		at   int    // the link that ends
	}
	var rings []ring
	for range near {
		n := 2 + rand.IntN(3)
		rings = append(rings, ring{n: n, kind: kinds[rand.IntN(len(kinds))], at: rand.IntN(n)})
	}
	for range true_ {
		rings = append(rings, ring{n: 2 + rand.IntN(3)})
	}
	rand.Shuffle(len(rings), func(i, j int) { rings[i], rings[j] = rings[j], rings[i] })
	var mu sync.Mutex
	var slowest time.Duration
	sem := make(chan struct{}, 3)
	var wg sync.WaitGroup
	for k, rg := range rings {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "ready"), 0o755); err != nil {
				t.Error(err)
				return
			}
			h := holdBin + " run --deadlock-after 0.2 "
			var cmds [][]string
			for i := range rg.n {
				next := fmt.Sprintf("l%d", (i+1)%rg.n)
				inner := h + next + " -- true"
				switch {
				case i == rg.at && rg.kind == "deadline":
					inner = holdBin + " run --deadlock-after 0.2 -w 1.5 " + next + " -- true"
				case i == rg.at && rg.kind == "timeout":
					inner = to + " 1.5 " + inner
				case i == rg.at && rg.kind == "letgo":
					script := fmt.Sprintf(`%s l%d -- sh -c 'touch ready/%d; sleep 1.5' & while [ "$(ls ready | wc -l)" -lt %d ]; do sleep 0.01; done; %s; s=$?; wait; exit $s`,
						h, i, i, rg.n, inner)
					cmds = append(cmds, []string{"sh", "-c", script})
					continue
				}
				cmds = append(cmds, append(strings.Fields(h+"l"+strconv.Itoa(i)), "--", "sh", "-c", cycleScript(i, rg.n, inner)))
			}
			start := time.Now()
			codes, outs := runAllNoFatal(dir, 60*time.Second, cmds)
			took := time.Since(start)
			deadlocks := 0
			for i, c := range codes {
				switch c {
				case exitDeadlock:
					deadlocks++
				case 0, exitConflict, 124:
				default:
					t.Errorf("ring %d (%+v): command %d exited %d: %q", k, rg, i, c, outs[i])
				}
			}
			switch {
			case rg.kind != "" && deadlocks > 0:
				t.Errorf("ring %d, a near-cycle (%+v): %d exit 70: %v %q", k, rg, deadlocks, codes, outs)
			case rg.kind == "" && deadlocks != 1:
				t.Errorf("ring %d, a true cycle of %d: %d exit 70, want 1: %v %q", k, rg.n, deadlocks, codes, outs)
			case rg.kind == "":
				mu.Lock()
				slowest = max(slowest, took)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("%d near-cycles, none reported; %d true cycles, one 70 each, the slowest ring done in %v", near, true_, slowest)
}

// runAllNoFatal is runAll for a goroutine: every command in dir, their
// exit statuses and stderr, -1 for one still running after bound (then
// killed).
func runAllNoFatal(dir string, bound time.Duration, cmds [][]string) ([]int, []string) {
	codes := make([]int, len(cmds))
	outs := make([]string, len(cmds))
	var wg sync.WaitGroup
	for i, c := range cmds {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir = dir
		b := new(strings.Builder)
		cmd.Stderr = b
		if err := cmd.Start(); err != nil {
			codes[i], outs[i] = -1, err.Error()
			continue
		}
		kill := time.AfterFunc(bound, func() { cmd.Process.Kill() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd.Wait()
			kill.Stop()
			codes[i], outs[i] = cmd.ProcessState.ExitCode(), b.String()
		}()
	}
	wg.Wait()
	return codes, outs
}

// boundedPython holds argv's first lock, says so in ready/, waits for the
// others, and waits 3 s for the second, keeping the first: exit 3 on a
// timeout, 70 on a deadlock, 0 with the lock, 1 otherwise.
const boundedPython = `
import os, sys, time
import hold
first, second, idx, n = sys.argv[1:5]
a = hold.lock(first)
open(os.path.join("ready", idx), "w").close()
while len(os.listdir("ready")) < int(n):
    time.sleep(0.01)
code = 0
try:
    hold.lock(second, timeout=3).release()
except hold.Deadlock as e:
    print(e, file=sys.stderr)
    code = 70
except hold.Timeout as e:
    print(e, file=sys.stderr)
    code = 3
a.release()
sys.exit(code)
`

// TestClientTimeoutLink: a Python client's wait with a timeout (the
// agent waits with that deadline) closes a ring with a hold run's: it is
// a link that ends by itself, so nobody may report a deadlock; the
// client times out and the hold run then gets its lock.
func TestClientTimeoutLink(t *testing.T) {
	codes, outs := clientScript{"python", boundedPython}.againstRun(t, "a client's wait with a timeout", holdBin+" run l0 -- true")
	if codes[0] != 3 {
		t.Errorf("the client: exit %d, stderr %q; want 3 (timed out, no deadlock)", codes[0], outs[0])
	}
	if codes[1] != 0 {
		t.Errorf("the hold run: exit %d, stderr %q; want 0 once the client gave up", codes[1], outs[1])
	}
}
