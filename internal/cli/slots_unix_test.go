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

	"github.com/hold-dev/hold/internal/testenv"
)

// slotCommand announces the slot and token hold run gave it in a file of
// its own (ready.PID), then waits until the test creates "go".
const slotCommand = `echo "$HOLD_SLOT $HOLD_TOKEN" > r.$$ && mv r.$$ ready.$$; i=0; while [ ! -e go ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done`

// slotHolder starts `hold run --slots N T -c slotCommand` and waits until
// its command runs; it returns the hold process and the slot it got.
func slotHolder(t *testing.T, dir string, n int) (*exec.Cmd, int) {
	t.Helper()
	before, _ := filepath.Glob(filepath.Join(dir, "ready.*"))
	cmd, stderr := startHold(t, dir, "run", "--slots", strconv.Itoa(n), "T", "-c", slotCommand)
	deadline := time.Now().Add(hangLimit)
	for {
		now, _ := filepath.Glob(filepath.Join(dir, "ready.*"))
		if len(now) > len(before) {
			for _, f := range now {
				if !contains(before, f) {
					var slot int
					fmt.Sscan(readFile(t, f), &slot)
					return cmd, slot
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("hold run --slots %d did not start its command: %s", n, stderr())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// statusSlots is what status --json says of a semaphore.
type statusSlots struct {
	Slots       int `json:"slots"`
	SlotsHeld   int `json:"slots_held"`
	SlotHolders []struct {
		Slot       int   `json:"slot"`
		Held       bool  `json:"held"`
		KernelPIDs []int `json:"kernel_pids"`
		Holder     *struct {
			PID     int      `json:"pid"`
			Command []string `json:"command"`
		} `json:"holder"`
	} `json:"slot_holders"`
}

// hold run --slots: each command gets its own slot in HOLD_SLOT; -n is
// busy only when all are held, and names every holder; another N is a
// usage error naming the N in use; a plain lock is kept out; status and
// ls show the semaphore.
func TestRunSlots(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var holders []*exec.Cmd
	seen := map[int]bool{}
	for range 3 {
		h, slot := slotHolder(t, dir, 4)
		if slot < 0 || slot > 3 || seen[slot] {
			t.Fatalf("HOLD_SLOT=%d, with slots %v already held", slot, seen)
		}
		seen[slot] = true
		holders = append(holders, h)
	}
	r := runHold(t, dir, "run", "-n", "--slots", "4", "T", "--", "sh", "-c", `echo "$HOLD_SLOT"`)
	if r.code != 0 || seen[atoi(strings.TrimSpace(r.stdout))] {
		t.Fatalf("hold run -n --slots 4 with 3 of 4 held: exit %d, HOLD_SLOT %q: %s", r.code, r.stdout, r.stderr)
	}
	h, _ := slotHolder(t, dir, 4)
	holders = append(holders, h)

	r = runHold(t, dir, "run", "--verbose", "-n", "--slots", "4", "T", "--", "true")
	if r.code != 1 {
		t.Fatalf("hold run -n --slots 4 with every slot held: exit %d: %s", r.code, r.stderr)
	}
	for _, h := range holders {
		if !strings.Contains(r.stderr, fmt.Sprintf("pid %d", h.Process.Pid)) {
			t.Errorf("the busy message does not name holder %d: %s", h.Process.Pid, r.stderr)
		}
	}
	r = runHold(t, dir, "run", "-n", "--slots", "3", "T", "--", "true")
	if r.code != 64 || !strings.Contains(r.stderr, "4 in use") {
		t.Errorf("hold run --slots 3 beside holders of 4: exit %d, want 64 naming 4: %s", r.code, r.stderr)
	}
	if r := runHold(t, dir, "run", "-n", "T", "--", "true"); r.code != 1 {
		t.Errorf("a plain hold run -n while slots are held: exit %d, want 1: %s", r.code, r.stderr)
	}

	r = runHold(t, dir, "status", "--json", "T")
	var st statusSlots
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Slots != 4 || st.SlotsHeld != 4 || len(st.SlotHolders) != 4 {
		t.Fatalf("status --json of a full semaphore: %v: %s", err, r.stdout)
	}
	for _, s := range st.SlotHolders {
		if s.Holder == nil || !s.Held {
			t.Errorf("status --json: slot %d has no holder: %s", s.Slot, r.stdout)
		}
	}
	if r := runHold(t, dir, "status", "T"); !strings.Contains(r.stdout, "semaphore, 4/4 held") {
		t.Errorf("status of a full semaphore: %s", r.stdout)
	}
	if r := runHold(t, dir, "ls", "."); !strings.Contains(r.stdout, "4/4 held") {
		t.Errorf("ls of a full semaphore: %s", r.stdout)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	for _, h := range holders {
		if code := waitExit(t, h); code != 0 {
			t.Errorf("slot holder exited %d", code)
		}
	}
	// Nothing held: another N just works.
	if r := runHold(t, dir, "run", "-n", "--slots", "3", "T", "--", "true"); r.code != 0 {
		t.Errorf("hold run --slots 3 with no slot held: exit %d: %s", r.code, r.stderr)
	}
}

// startHandSlot takes slot k of T in dir by hand, as docs/cli.md shows
// (flock -s T.lock flock T.lock.slotK), running gatedCommand, and returns
// once it runs; the test's end lets it finish.
func startHandSlot(t *testing.T, dir string, k int) {
	t.Helper()
	flock := testenv.LookPath(t, "flock", "flock(1) is not installed (util-linux)")
	fl := exec.Command(flock, "-s", "T.lock", flock, "T.lock.slot"+strconv.Itoa(k), "sh", "-c", gatedCommand)
	fl.Dir = dir
	if err := fl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
		fl.Wait()
	})
	waitFor(t, filepath.Join(dir, "ready"))
}

// A slot taken by hand with flock(1), as docs/cli.md shows, counts as held.
func TestSlotsFlockByHand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runHold(t, dir, "run", "--slots", "2", "T", "--", "true"); r.code != 0 {
		t.Fatalf("hold run --slots 2: exit %d: %s", r.code, r.stderr)
	}
	startHandSlot(t, dir, 0)
	r := runHold(t, dir, "run", "-n", "--slots", "2", "T", "--", "sh", "-c", `echo "$HOLD_SLOT"`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "1" {
		t.Fatalf("with slot 0 held by flock(1): exit %d, HOLD_SLOT %q, want 1: %s", r.code, r.stdout, r.stderr)
	}
	r = runHold(t, dir, "status", "--json", "T")
	var st statusSlots
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.SlotsHeld != 1 || !st.SlotHolders[0].Held {
		t.Fatalf("status --json with slot 0 held by flock(1): %v: %s", err, r.stdout)
	}
	h, slot := slotHolder(t, dir, 2)
	if slot != 1 {
		t.Errorf("the holder beside flock(1) got slot %d, want 1", slot)
	}
	if r := runHold(t, dir, "run", "-n", "--slots", "2", "T", "--", "true"); r.code != 1 {
		t.Errorf("with flock(1) and hold in both slots: exit %d, want 1: %s", r.code, r.stderr)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, h)
}

// --slots below 1, beside -s, or given to update is a usage error.
func TestSlotsUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// F has content, so that cat prints something: the 64 is the flag's.
	os.WriteFile(filepath.Join(dir, "F"), []byte("x\n"), 0o644)
	for _, args := range [][]string{
		{"run", "--slots", "0", "T", "--", "true"},
		{"run", "--slots", "-2", "T", "--", "true"},
		{"run", "-s", "--slots", "2", "T", "--", "true"},
		{"update", "--slots", "2", "F", "--", "cat"},
		{"append", "--slots", "2", "F", "x"},
	} {
		if r := runHold(t, dir, args...); r.code != 64 {
			t.Errorf("hold %v: exit %d, want 64: %s", args, r.code, r.stderr)
		}
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// A slot's command keeps the whole slot when its hold run dies: the slot
// file and the shared hold of the lock file, which hold passes as fds 3
// and 4. With the slot file alone, a plain lock (which waits only for the
// lock file) got in beside the command; another N is refused because the
// slot file is held.
func TestSlotsKeptWhenHoldDies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h, _ := slotHolder(t, dir, 2)
	if err := h.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	h.Wait()
	t.Cleanup(func() { os.WriteFile(filepath.Join(dir, "go"), nil, 0o644) })
	if r := runHold(t, dir, "run", "-n", "T", "--", "true"); r.code != 1 {
		t.Errorf("a plain hold run -n while a killed hold's command keeps its slot: exit %d, want 1 (busy): %s", r.code, r.stderr)
	}
	if r := runHold(t, dir, "run", "-n", "--slots", "3", "T", "--", "true"); r.code != 64 {
		t.Errorf("hold run --slots 3 while a command keeps a slot of 2: exit %d, want 64: %s", r.code, r.stderr)
	}
	r := runHold(t, dir, "run", "--slots", "2", "T", "--", "sh", "-c", `ls /proc/self/fd`)
	if r.code != 0 {
		t.Fatalf("hold run --slots 2 beside the kept slot: exit %d: %s", r.code, r.stderr)
	}
	for _, fd := range []string{"3", "4"} {
		if !strings.Contains(" "+strings.Join(strings.Fields(r.stdout), " ")+" ", " "+fd+" ") {
			t.Errorf("a slot's command lacks fd %s: %q", fd, r.stdout)
		}
	}
	// The command ends: the path is a plain lock's again.
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	deadline := time.Now().Add(hangLimit)
	for {
		r := runHold(t, dir, "run", "-n", "T", "--", "true")
		if r.code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plain lock stayed busy after the slot's command ended: exit %d: %s", r.code, r.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
