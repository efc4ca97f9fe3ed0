//go:build unix

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/testenv"
)

// The Node and Python holders of TestSlotsMixed: each takes one of 4 slots
// of T, announces its slot and token in ready.PID, and holds it until the
// test creates "go".
const (
	nodeSlotHolder = `const fs = require('fs'); const hold = require(process.env.HOLD_JS);
(async () => {
  const l = await hold.lock('T', { slots: 4 });
  fs.writeFileSync('r.' + process.pid, l.slot + ' ' + l.token); fs.renameSync('r.' + process.pid, 'ready.' + process.pid);
  while (!fs.existsSync('go')) await new Promise((r) => setTimeout(r, 20));
  await l.release();
  process.exit(0);
})().catch((e) => { console.error(e); process.exit(1); });`
	pythonSlotHolder = `import os, time, hold
l = hold.lock("T", slots=4)
with open("r.%d" % os.getpid(), "w") as f:
    f.write("%d %d" % (l.slot, l.token))
os.rename("r.%d" % os.getpid(), "ready.%d" % os.getpid())
while not os.path.exists("go"):
    time.sleep(0.02)
l.release()
`
)

// startAnnouncer starts cmd in dir and waits until it announces its slot
// in a new ready.* file (as slotCommand and the holders above do).
func startAnnouncer(t *testing.T, dir string, cmd *exec.Cmd) int {
	t.Helper()
	before, _ := filepath.Glob(filepath.Join(dir, "ready.*"))
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
		cmd.Wait()
	})
	deadline := time.Now().Add(hangLimit)
	for time.Now().Before(deadline) {
		now, _ := filepath.Glob(filepath.Join(dir, "ready.*"))
		for _, f := range now {
			if !contains(before, f) {
				var slot int
				fmt.Sscan(readFile(t, f), &slot)
				return slot
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%v did not announce a slot: %s", cmd.Args, stderr.String())
	return -1
}

// Shell (hold run), Go, Node and Python holders share one semaphore: each
// gets a slot of its own, a fifth request is busy, and status names all
// four.
func TestSlotsMixed(t *testing.T) {
	t.Parallel()
	node := testenv.LookPath(t, "node", "node is not installed")
	python := testenv.LookPath(t, "python3", "python3 is not installed")
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "HOLD_BIN="+holdBin, "HOLD_JS="+filepath.Join(root, "js", "index.cjs"),
		"PYTHONPATH="+filepath.Join(root, "python", "src"))
	slots := map[int]string{}
	note := func(who string, slot int) {
		if other, ok := slots[slot]; ok || slot < 0 || slot > 3 {
			t.Fatalf("%s got slot %d, which %s holds", who, slot, other)
		}
		slots[slot] = who
	}
	_, slot := slotHolder(t, dir, 4)
	note("hold run", slot)

	ctx, cancel := context.WithTimeout(context.Background(), hangLimit)
	defer cancel()
	l, err := hold.Acquire(ctx, filepath.Join(dir, "T"), hold.Slots(4))
	if err != nil {
		t.Fatalf("Go: %v", err)
	}
	defer l.Release()
	note("Go", l.Slot())

	nc := exec.Command(node, "-e", nodeSlotHolder)
	nc.Env = env
	note("Node", startAnnouncer(t, dir, nc))
	pc := exec.Command(python, "-c", pythonSlotHolder)
	pc.Env = env
	note("Python", startAnnouncer(t, dir, pc))

	if r := runHold(t, dir, "run", "-n", "--slots", "4", "T", "--", "true"); r.code != 1 {
		t.Errorf("a fifth holder beside shell, Go, Node and Python: exit %d, want 1: %s", r.code, r.stderr)
	}
	r := runHold(t, dir, "status", "--json", "T")
	var st statusSlots
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.SlotsHeld != 4 {
		t.Fatalf("status --json with four holders: %v: %s", err, r.stdout)
	}
	// Each holder is named: the Go one by its pid, the clients by the
	// agent that holds for them, whose command names the client's pid.
	named := map[string]bool{}
	for _, s := range st.SlotHolders {
		if s.Holder == nil {
			t.Errorf("slot %d (%s) has no holder: %s", s.Slot, slots[s.Slot], r.stdout)
			continue
		}
		named[fmt.Sprintf("pid %d", s.Holder.PID)] = true
		named[strings.Join(s.Holder.Command, " ")] = true
	}
	for who, pid := range map[string]int{"Go": os.Getpid(), "Node": nc.Process.Pid, "Python": pc.Process.Pid} {
		found := false
		for n := range named {
			found = found || n == fmt.Sprintf("pid %d", pid) || strings.HasSuffix(n, fmt.Sprintf(" pid %d", pid))
		}
		if !found {
			t.Errorf("the %s holder (pid %d) is not named by status: %s", who, pid, r.stdout)
		}
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	l.Release()
	if r := runHold(t, dir, "run", "-w", strconv.Itoa(int(hangLimit/time.Second)), "--slots", "4", "T", "--", "true"); r.code != 0 {
		t.Errorf("a holder after all four let go: exit %d: %s", r.code, r.stderr)
	}
}
