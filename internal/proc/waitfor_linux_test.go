package proc

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestFlockKeepers: the keepers of a flock(2) lock are every process with
// a descriptor of the open file description that holds it, found after
// the process that took it closed its descriptor (which /proc/locks
// still names), and never a process that has the file open through
// another description or waits for the lock. The same answers within
// ShareLockTable, from the descriptor index a listing reads once.
func TestFlockKeepers(t *testing.T) {
	t.Run("each", func(t *testing.T) { testFlockKeepers(t, false) })
	t.Run("indexed", func(t *testing.T) { testFlockKeepers(t, true) })
}

func testFlockKeepers(t *testing.T, indexed bool) {
	dir := t.TempDir()
	path := filepath.Join(dir, "t.lock")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// A child that inherits the description as its descriptor 3, and one
	// that opens the file itself and waits for the lock.
	keeper := exec.Command("sleep", "60")
	keeper.ExtraFiles = []*os.File{f}
	waiter := exec.Command("flock", path, "true")
	for _, c := range []*exec.Cmd{keeper, waiter} {
		if err := c.Start(); err != nil {
			t.Skipf("%s: %v", c.Path, err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	}
	k, ok := FileKeyOf(path)
	if !ok {
		t.Fatal("no key")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids, unknown := FlockKeepers(k)
		slices.Sort(pids)
		want := []int{os.Getpid(), keeper.Process.Pid}
		slices.Sort(want)
		if slices.Equal(pids, want) && len(unknown) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("keepers %v (unknown %v), want %v", pids, unknown, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if indexed {
		// Once both children are in place: the index is a snapshot.
		defer ShareLockTable()()
		pids, unknown := FlockKeepers(k)
		slices.Sort(pids)
		want := []int{os.Getpid(), keeper.Process.Pid}
		slices.Sort(want)
		if !slices.Equal(pids, want) || len(unknown) != 0 {
			t.Fatalf("keepers from the index %v (unknown %v), want %v", pids, unknown, want)
		}
	}
	openers := Openers(k)
	if !slices.Contains(openers, keeper.Process.Pid) || !slices.Contains(openers, waiter.Process.Pid) || slices.Contains(openers, os.Getpid()) {
		t.Errorf("Openers %v: want both children (%d, %d) and not this process", openers, keeper.Process.Pid, waiter.Process.Pid)
	}
	if !Keeps(keeper.Process.Pid, k) || Keeps(waiter.Process.Pid, k) {
		t.Errorf("Keeps: the inheriting child %v, the waiter %v; want true, false", Keeps(keeper.Process.Pid, k), Keeps(waiter.Process.Pid, k))
	}
	// This process closes its descriptor: /proc/locks still names it,
	// the child alone keeps the lock.
	g, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	f.Close()
	if got := LockKeepers(g.Fd()); !slices.Equal(got, []int{keeper.Process.Pid}) {
		t.Errorf("LockKeepers after the taker closed its descriptor: %v, want [%d] (LockHolders says %v)", got, keeper.Process.Pid, LockHolders(g.Fd()))
	}
}

// TestSoleChildWaiter: a shell waiting for its one foreground command
// (wait4), or in dash's or bash's wait builtin, waits for that child; a
// shell with a second child, or one that sleeps in a read rather than a
// wait, does not.
func TestSoleChildWaiter(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, shell, script string
		waits               bool
	}{
		{"foreground command", "sh", `sleep 60`, true},
		{"sh wait builtin", "sh", `sleep 60 & wait $!`, true},
		{"bash wait builtin", "bash", `sleep 60 & wait $!`, true},
		{"two children", "sh", `sleep 60 & sleep 60`, false},
		{"a read, not a wait", "sh", `sleep 60 & read x`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := exec.LookPath(c.shell); err != nil {
				t.Skip(err)
			}
			cmd := exec.Command(c.shell, "-c", c.script+"; :")
			cmd.Dir = dir
			if c.name == "a read, not a wait" {
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				defer w.Close()
				defer r.Close()
				cmd.Stdin = r
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, kid := range children(cmd.Process.Pid) {
					unix.Kill(kid, unix.SIGKILL)
				}
				cmd.Process.Kill()
				cmd.Wait()
			}()
			// Until the shell has started its children and settled.
			deadline := time.Now().Add(30 * time.Second)
			for {
				kid, ok := SoleChildWaiter(cmd.Process.Pid)
				settled := len(children(cmd.Process.Pid)) >= 1 && asleep(cmd.Process.Pid)
				if c.waits && ok && strings.HasPrefix(Cmdline(kid), "sleep") {
					return
				}
				if !c.waits && settled && time.Now().After(deadline.Add(-29*time.Second)) {
					if ok {
						t.Fatalf("SoleChildWaiter = %d, true; want false", kid)
					}
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("SoleChildWaiter = %d, %v", kid, ok)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// children lists pid's children.
func children(pid int) []int {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

// asleep reports whether pid sleeps (state S).
func asleep(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'S'
}

// TestDescendsFrom: a child descends from this process, and this process
// not from its child.
func TestDescendsFrom(t *testing.T) {
	c := exec.Command("sleep", "60")
	if err := c.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { c.Process.Kill(); c.Wait() }()
	if !DescendsFrom(c.Process.Pid, []int{os.Getpid()}) || !DescendsFrom(os.Getpid(), []int{os.Getpid()}) {
		t.Error("a child does not descend from its parent")
	}
	if DescendsFrom(os.Getpid(), []int{c.Process.Pid}) {
		t.Error("a parent descends from its child")
	}
}
