//go:build unix

package cli

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hold-dev/hold"
)

// churnCommand is the command of each churning holder: it writes which
// processes hold which slot (hold run's pid, the command's) into a file of
// its own, then holds the slot a moment. It appends: a test's churn runs
// so many processes that pids come round again (pid_max is 32768 here),
// and a later command of the same pid must not erase what an earlier one
// wrote.
const churnCommand = `echo "$PPID $$ $HOLD_SLOT" >> held.$$; exec sleep 0.02`

// churnSlots keeps workers hold runs of --slots n on T in dir (with the
// protocol's flags proto), one after
// another each, until stop is closed; waiters queue and park on the slots
// all the time. It returns once every run has ended.
func churnSlots(t *testing.T, dir string, n, workers int, proto []string, stop <-chan struct{}) func() {
	t.Helper()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				args := append([]string{"run", "-w", "60", "--slots", strconv.Itoa(n)}, proto...)
				cmd := exec.Command(holdBin, append(args, "T", "-c", churnCommand)...)
				cmd.Dir = dir
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("hold run --slots %d: %v: %s", n, err, out)
					return
				}
			}
		}()
	}
	return wg.Wait
}

// slotsHeldBy reads what the churning holders wrote: which slots each
// process held (hold run's pid and its command's pid both name it; a pid
// that came round again may have held more than one, at different times).
func slotsHeldBy(t *testing.T, dir string) map[int][]int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "held.*"))
	slot := make(map[int][]int, 2*len(files))
	for _, f := range files {
		for _, line := range strings.Split(strings.TrimSpace(readFile(t, f)), "\n") {
			var run, command, k int
			if _, err := fmt.Sscan(line, &run, &command, &k); err != nil {
				t.Fatalf("%s: %q: %v", f, line, err)
			}
			slot[run] = append(slot[run], k)
			slot[command] = append(slot[command], k)
		}
	}
	return slot
}

// Every slot hold status names as held is held by the pids it names: a
// waiter parked on the slots while it waited for one, or after it took
// another, never makes a slot look held (it did, for the instant the
// kernel granted such a wait before it let go).
func TestSlotStatusNamesOnlyHolders(t *testing.T) {
	t.Parallel()
	eachSlotProtocol(t, slotStatusNamesOnlyHolders)
}

// eachSlotProtocol runs test once for each protocol of this machine that
// keeps semaphores, one after another, with the flags that choose it.
func eachSlotProtocol(t *testing.T, test func(t *testing.T, proto []string)) {
	for _, c := range []struct {
		name  string
		proto []string
	}{{"kernel", nil}, {"fair", []string{"--fair"}}, {"portable", []string{"--protocol", "dir"}}} {
		t.Run(c.name, func(t *testing.T) { test(t, c.proto) })
	}
}

func slotStatusNamesOnlyHolders(t *testing.T, proto []string) {
	dir := t.TempDir()
	const n = 3
	stop := make(chan struct{})
	wait := churnSlots(t, dir, n, 5, proto, stop)
	type named struct{ slot, pid int }
	var seen []named
	var emptyHeld []string
	for range 120 {
		r := runHold(t, dir, append(append([]string{"status", "--json"}, proto...), "T")...)
		if r.code != 0 && r.code != exitStatusFree {
			if strings.Contains(r.stderr, "no such") || r.stdout == "" {
				continue // before the first holder made the files
			}
			close(stop)
			wait()
			t.Fatalf("hold status --json: exit %d: %s", r.code, r.stderr)
		}
		var st statusSlots
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			continue // not yet a semaphore
		}
		for _, s := range st.SlotHolders {
			if !s.Held {
				continue
			}
			pids := append([]int(nil), s.KernelPIDs...)
			if s.Holder != nil {
				pids = append(pids, s.Holder.PID)
			}
			if len(pids) == 0 && len(proto) < 2 && runtime.GOOS == "linux" {
				// The kernel knows who keeps a kernel lock on Linux. (A
				// portable slot's holder is named once it has stamped
				// its slot, a moment after its mkdir took it.)
				emptyHeld = append(emptyHeld, r.stdout)
			}
			for _, pid := range pids {
				seen = append(seen, named{s.Slot, pid})
			}
		}
	}
	close(stop)
	wait()
	slot := slotsHeldBy(t, dir)
	if len(slot) < 20 {
		t.Fatalf("only %d processes held a slot: the churn did not run", len(slot)/2)
	}
	bad := 0
	for _, s := range seen {
		if k, ok := slot[s.pid]; !ok || !slices.Contains(k, s.slot) {
			if bad++; bad <= 5 {
				t.Errorf("status named pid %d as a holder of slot %d; that pid held slots %v (held: %v)", s.pid, s.slot, k, ok)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d named holders did not hold the slot named", bad, len(seen))
	}
	for _, out := range emptyHeld {
		t.Errorf("status says a slot is held and names nobody: %s", out)
	}
}

// -n is busy only when every slot is held: with fewer holders than slots
// coming and going, and the semaphore looked at as fast as this process
// can (hold.Inspect, as hold status does), every try takes a slot. It did
// not: a look's instant lock of a free slot refused a kernel try, and a
// portable try found the waiting gate taken by a holder on its way in.
func TestSlotTryBusyOnlyWhenAllHeld(t *testing.T) {
	t.Parallel()
	eachSlotProtocol(t, slotTryBusyOnlyWhenAllHeld)
}

func slotTryBusyOnlyWhenAllHeld(t *testing.T, proto []string) {
	dir := t.TempDir()
	const n = 3
	stop := make(chan struct{})
	wait := churnSlots(t, dir, n, n-1, proto, stop)
	defer wait()
	defer close(stop)
	var looking atomic.Bool
	looking.Store(true)
	looked := make(chan struct{})
	go func() {
		defer close(looked)
		for looking.Load() {
			hold.Inspect(filepath.Join(dir, "T"))
		}
	}()
	defer func() { looking.Store(false); <-looked }()
	busy := 0
	const tries = 40
	for range tries {
		args := append([]string{"run", "-n", "--slots", strconv.Itoa(n)}, proto...)
		r := runHold(t, dir, append(args, "T", "--", "true")...)
		if r.code != 0 {
			if busy++; busy <= 3 {
				t.Errorf("hold run -n --slots %d beside %d holders: exit %d: %s", n, n-1, r.code, r.stderr)
			}
		}
	}
	if busy > 0 {
		t.Errorf("-n was refused %d times of %d while a slot was free", busy, tries)
	}
}
