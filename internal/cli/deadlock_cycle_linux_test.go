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

// oneReportsDeadlock checks the outcome of a cycle of commands (their
// exit statuses and standard errors): exactly one exits with the
// deadlock status (70), with a message that names every one of locks,
// and the others complete. It returns the one that reported.
func oneReportsDeadlock(t *testing.T, codes []int, outs []string, locks ...string) int {
	t.Helper()
	failed := -1
	for i, c := range codes {
		switch {
		case c == exitDeadlock && failed < 0:
			failed = i
		case c != 0:
			t.Errorf("command %d: exit %d, stderr %q", i, c, outs[i])
		}
	}
	if failed < 0 {
		t.Fatalf("nobody reported the deadlock: exits %v, %q", codes, outs)
	}
	for _, l := range locks {
		if !strings.Contains(outs[failed], l) {
			t.Errorf("the deadlock message does not name %s: %s", l, outs[failed])
		}
	}
	return failed
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
			var locks []string
			for i := range n {
				locks = append(locks, fmt.Sprintf("l%d.lock", i))
			}
			failed := oneReportsDeadlock(t, codes, outs, locks...)
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
// lock and ask for the other's, saying that the request keeps the first
// (held_by, as a thread does): exactly one request fails with EDEADLK
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
		c.send(fmt.Sprintf(`{"id":2,"op":"acquire","target":%q,"held_by":[%v]}`, locks[1-i], held[i]))
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

// TestAgentNoFalseCycle: the same two agents, where the first client's
// request does not keep its lock (another of its threads or tasks holds
// it, and lets go in a while): that is no deadlock, and neither request
// may fail; both are granted once the first client releases its lock.
func TestAgentNoFalseCycle(t *testing.T) {
	dir := t.TempDir()
	agents := []*agentClient{startAgent(t, holdBin, dir), startAgent(t, holdBin, dir)}
	locks := []string{"a", "b"}
	held := make([]any, 2)
	for i, c := range agents {
		held[i] = wantOK(t, c.request(fmt.Sprintf(`{"id":1,"op":"acquire","target":%q}`, locks[i])))["lock"]
	}
	agents[0].send(`{"id":2,"op":"acquire","target":"b"}`)
	agents[1].send(fmt.Sprintf(`{"id":2,"op":"acquire","target":"a","held_by":[%v]}`, held[1]))
	replies := make(chan int, 2)
	got := make([]map[string]any, 2)
	for i, c := range agents {
		go func() { got[i] = c.reply(2); replies <- i }()
	}
	select {
	case i := <-replies:
		t.Fatalf("agent %d answered while the cycle of holds stood: %v", i, got[i])
	case <-time.After(4 * time.Second): // well past both searches
	}
	// Its reply is read once the goroutine reading agent 0's is done.
	agents[0].send(fmt.Sprintf(`{"id":3,"op":"release","lock":%v}`, held[0]))
	if i := <-replies; i != 1 {
		t.Fatalf("agent %d answered first: %v", i, got[i])
	}
	wantOK(t, got[1])
	wantOK(t, agents[1].request(fmt.Sprintf(`{"id":4,"op":"release","lock":%v}`, got[1]["lock"])))
	wantOK(t, agents[1].request(fmt.Sprintf(`{"id":5,"op":"release","lock":%v}`, held[1])))
	<-replies
	wantOK(t, got[0])
	wantOK(t, agents[0].reply(3))
}

// cycleNode and cyclePython hold argv's first lock, say so in ready/,
// wait for the others, and take the second: exit 0 with it, 70 on a
// deadlock (the message on stderr), 1 otherwise.
const cycleNode = `
const fs = require('fs');
const hold = require(process.env.HOLD_JS);
const [first, second, idx, n] = process.argv.slice(1);
(async () => {
  const a = await hold.lock(first);
  fs.writeFileSync('ready/' + idx, '');
  while (fs.readdirSync('ready').length < Number(n)) await new Promise((r) => setTimeout(r, 10));
  let code = 0;
  try {
    const b = await hold.lock(second, { heldBy: [a] });
    await b.release();
  } catch (e) {
    console.error(e.message);
    code = e.code === 'EDEADLK' ? 70 : 1;
  }
  await a.release();
  process.exit(code);
})().catch((e) => { console.error(e); process.exit(1); });
`

const cyclePython = `
import os, sys, time
import hold
first, second, idx, n = sys.argv[1:5]
a = hold.lock(first)
open(os.path.join("ready", idx), "w").close()
while len(os.listdir("ready")) < int(n):
    time.sleep(0.01)
code = 0
try:
    hold.lock(second).release()
except hold.Deadlock as e:
    print(e, file=sys.stderr)
    code = 70
a.release()
sys.exit(code)
`

// asideNode and asidePython hold argv's first lock in one task or
// thread, which lets go after four seconds, say so in ready/, wait for
// the others, and take the second in another task or thread, which keeps
// nothing: exit 0 once both are done, 70 on a deadlock, 1 otherwise.
const asideNode = `
const fs = require('fs');
const hold = require(process.env.HOLD_JS);
const [first, second, idx, n] = process.argv.slice(1);
(async () => {
  const a = await hold.lock(first);
  const aside = new Promise((r) => setTimeout(r, 4000)).then(() => a.release());
  fs.writeFileSync('ready/' + idx, '');
  while (fs.readdirSync('ready').length < Number(n)) await new Promise((r) => setTimeout(r, 10));
  let code = 0;
  try {
    const b = await hold.lock(second);
    await b.release();
  } catch (e) {
    console.error(e.message);
    code = e.code === 'EDEADLK' ? 70 : 1;
  }
  await aside;
  process.exit(code);
})().catch((e) => { console.error(e); process.exit(1); });
`

const asidePython = `
import os, sys, threading, time
import hold
first, second, idx, n = sys.argv[1:5]
taken = threading.Event()
def aside():
    with hold.lock(first):
        taken.set()
        time.sleep(4)
t = threading.Thread(target=aside)
t.start()
taken.wait()
open(os.path.join("ready", idx), "w").close()
while len(os.listdir("ready")) < int(n):
    time.sleep(0.01)
code = 0
try:
    hold.lock(second).release()
except hold.Deadlock as e:
    print(e, file=sys.stderr)
    code = 70
t.join()
sys.exit(code)
`

// TestNoFalseCycleThroughClients: a Node client whose one task holds l0
// while another waits for l1, and a Python client whose one thread holds
// l0 while another waits for l1, each against a hold run that holds l1
// and runs a hold run of l0: the client's wait does not keep l0, which
// its first task or thread releases in a while, so this is no deadlock;
// nobody may report one, and all complete.
func TestNoFalseCycleThroughClients(t *testing.T) {
	for _, c := range []clientScript{{"node", asideNode}, {"python", asidePython}} {
		t.Run(c.client, func(t *testing.T) {
			codes, outs := c.againstRun(t, "a client's concurrent holds", holdBin+" run l0 -- true")
			for i, code := range codes {
				if code != 0 {
					t.Errorf("command %d: exit %d (want 0, no deadlock), stderr %q", i, code, outs[i])
				}
			}
		})
	}
}

// offNode and offPython hold argv's first lock, say so in ready/, wait
// for the others, and wait 4 s for the second, keeping the first, with
// the deadlock search off: exit 3 on a timeout, 70 on a deadlock, 0 with
// the lock, 1 otherwise.
const offNode = `
const fs = require('fs');
const hold = require(process.env.HOLD_JS);
const [first, second, idx, n] = process.argv.slice(1);
(async () => {
  const a = await hold.lock(first);
  fs.writeFileSync('ready/' + idx, '');
  while (fs.readdirSync('ready').length < Number(n)) await new Promise((r) => setTimeout(r, 10));
  let code = 0;
  try {
    const b = await hold.lock(second, { heldBy: [a], deadlockAfter: 0, wait: 4 });
    await b.release();
  } catch (e) {
    console.error(e.message);
    code = e.code === 'EDEADLK' ? 70 : e.code === 'ETIMEDOUT' ? 3 : 1;
  }
  await a.release();
  process.exit(code);
})().catch((e) => { console.error(e); process.exit(1); });
`

const offPython = `
import os, sys, time
import hold
first, second, idx, n = sys.argv[1:5]
a = hold.lock(first)
open(os.path.join("ready", idx), "w").close()
while len(os.listdir("ready")) < int(n):
    time.sleep(0.01)
code = 0
try:
    hold.lock(second, deadlock_after=0, timeout=4).release()
except hold.Deadlock as e:
    print(e, file=sys.stderr)
    code = 70
except hold.Timeout as e:
    print(e, file=sys.stderr)
    code = 3
a.release()
sys.exit(code)
`

// TestClientDeadlockAfterZero: a Node and a Python client whose wait
// closes a cycle with a hold run's, with the clients' deadlockAfter: 0
// and deadlock_after=0: the client's wait is not searched, so the
// cycle, which the hold run's search cannot close alone, is never
// reported; both waits time out.
func TestClientDeadlockAfterZero(t *testing.T) {
	for _, c := range []clientScript{{"node", offNode}, {"python", offPython}} {
		t.Run(c.client, func(t *testing.T) {
			codes, outs := c.againstRun(t, "the client's deadlock option", holdBin+" run -w 6 l0 -- true")
			if codes[0] != 3 {
				t.Errorf("the client: exit %d, stderr %q; want 3 (timed out, no deadlock search)", codes[0], outs[0])
			}
			if codes[1] == exitDeadlock || strings.Contains(outs[1], "deadlock") {
				t.Errorf("the hold run reported a cycle it cannot close alone: exit %d, stderr %q", codes[1], outs[1])
			}
		})
	}
}

// TestMixedCycle: a cycle through a hold run, a Node client and a Python
// client (the agent waits for the latter two) ends as any other: one exit
// 70 naming every lock, the others complete.
func TestMixedCycle(t *testing.T) {
	node := testenv.LookPath(t, "node", "a cycle through a Node client")
	py := testenv.LookPath(t, "python3", "a cycle through a Python client")
	dir := t.TempDir()
	runIn(t, dir, nil, "mkdir", "ready")
	clientEnv(t)
	cmds := [][]string{
		{holdBin, "run", "l0", "--", "sh", "-c", cycleScript(0, 3, holdBin+" run l1 -- true")},
		{node, "-e", cycleNode, "--", "l1", "l2", "1", "3"},
		{py, "-c", cyclePython, "l2", "l0", "2", "3"},
	}
	start := time.Now()
	codes, outs := runAll(t, dir, 60*time.Second, cmds)
	t.Logf("exits %v in %v", codes, time.Since(start))
	t.Log(outs[oneReportsDeadlock(t, codes, outs, "l0.lock", "l1.lock", "l2.lock")])
}

// cycleInProcessPython is cyclePython with the first lock taken in the
// Python process itself (the agent's recipe: a plain kernel lock the
// client took and released through the agent before), exit 3 if it was
// not: a cycle through such a lock is found as through one the agent
// holds (proc.WithCallerKeeps).
var cycleInProcessPython = strings.Replace(cyclePython, "a = hold.lock(first)\n", `for _ in range(3):
    a = hold.lock(first)
    if a._held is not None:
        break
    a.release()
if a._held is None:
    print("the first lock was not taken in this process", file=sys.stderr)
    sys.exit(3)
`, 1)

// TestInProcessCycle: two Python clients that each hold one lock in
// their own process (not through the agent) and wait, through the
// agent, for the other's: exactly one reports the deadlock, naming both
// locks, and the other completes. Before the library counted a client's
// in-process locks as kept by its wait, the chain ended at the client,
// and both waited for ever.
func TestInProcessCycle(t *testing.T) {
	if cycleInProcessPython == cyclePython {
		t.Fatal("cycleInProcessPython no longer takes its first lock in-process: cyclePython's first line changed")
	}
	py := testenv.LookPath(t, "python3", "a cycle through Python clients' in-process locks")
	dir := t.TempDir()
	runIn(t, dir, nil, "mkdir", "ready")
	clientEnv(t)
	codes, outs := runAll(t, dir, 60*time.Second, [][]string{
		{py, "-c", cycleInProcessPython, "l0", "l1", "0", "2"},
		{py, "-c", cycleInProcessPython, "l1", "l0", "1", "2"},
	})
	oneReportsDeadlock(t, codes, outs, "l0.lock", "l1.lock")
}

// clientEnv sets what the Node and Python scripts of these tests need:
// the hold executable and where the two packages are.
func clientEnv(t *testing.T) {
	js, err := filepath.Abs("../../js/index.cjs")
	if err != nil {
		t.Fatal(err)
	}
	pysrc, err := filepath.Abs("../../python/src")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOLD_BIN", holdBin)
	t.Setenv("HOLD_JS", js)
	t.Setenv("PYTHONPATH", pysrc)
	t.Setenv("PYTHONDONTWRITEBYTECODE", "1")
}

// clientScript is a Node or Python script (client "node" or "python")
// that holds argv's first lock and then waits for the second.
type clientScript struct{ client, script string }

// againstRun runs the script on l0 then l1 beside a hold run that holds
// l1 and runs inner (which takes l0) once both hold their first lock, and
// returns their exit statuses and standard errors, the script's first.
func (c clientScript) againstRun(t *testing.T, why, inner string) ([]int, []string) {
	t.Helper()
	clientEnv(t)
	prog, flag, sep := "python3", "-c", []string(nil)
	if c.client == "node" {
		prog, flag, sep = "node", "-e", []string{"--"}
	}
	bin := testenv.LookPath(t, prog, why)
	dir := t.TempDir()
	runIn(t, dir, nil, "mkdir", "ready")
	client := append(append([]string{bin, flag, c.script}, sep...), "l0", "l1", "0", "2")
	return runAll(t, dir, 60*time.Second, [][]string{
		client,
		{holdBin, "run", "l1", "--", "sh", "-c", cycleScript(1, 2, inner)},
	})
}
