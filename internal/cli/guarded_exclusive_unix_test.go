//go:build unix

package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hold-dev/hold/internal/nameddir"
)

// Issue 53: `hold update --slots 4` and `hold append --slots 4` were
// accepted, and 20 parallel increments under --slots 4 left 5. update and
// append read or write FILE on the assumption that nobody else writes it
// while they hold its lock, so every flag that would let another holder
// in beside them is refused, and every flag they accept keeps them alone.

// TestGuardedRefusesSharingFlags: -s, --shared and --slots, in every
// spelling, are usage errors (64) for update and append, with a message
// that says what they would have cost and what to do; nothing is run,
// written or locked.
func TestGuardedRefusesSharingFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "c.json")
	os.WriteFile(file, []byte(`{"n":0}`+"\n"), 0o644)
	for _, c := range []struct {
		flags []string
		named string // how the message names the flag
	}{
		{[]string{"--slots", "4"}, "--slots"}, {[]string{"--slots=4"}, "--slots"}, {[]string{"--slots", "1"}, "--slots"},
		{[]string{"-s"}, "-s"}, {[]string{"--shared"}, "--shared"}, {[]string{"-ns"}, "-s (in -ns)"}, {[]string{"-n", "-s"}, "-s"},
	} {
		flags := c.flags
		for _, op := range []string{"update", "append"} {
			args := append([]string{op}, flags...)
			if op == "update" {
				args = append(args, "c.json", "--", "sh", "-c", incrementFilter+"; touch ran")
			} else {
				args = append(args, "c.json", "more")
			}
			r := runHold(t, dir, args...)
			if r.code != exitUsage {
				t.Errorf("hold %v: exit %d, want %d: %s", args, r.code, exitUsage, r.stderr)
			}
			for _, want := range []string{"hold " + op + ": " + c.named + " does not apply", "does not apply", "beside this one", "Leave "} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("hold %v: the message does not say %q: %s", args, want, r.stderr)
				}
			}
		}
	}
	if got := readFile(t, file); got != `{"n":0}`+"\n" {
		t.Errorf("c.json is %q after refused commands", got)
	}
	for _, left := range []string{"ran", "c.json.lock", "c.json.lock.slots"} {
		if _, err := os.Lstat(filepath.Join(dir, left)); err == nil {
			t.Errorf("%s exists after refused commands", left)
		}
	}
}

// guardedFlagVariants are the ways of taking FILE's lock that update and
// append accept, each to be given to 20 processes at once.
var guardedFlagVariants = [][]string{
	nil,
	{"-x"},
	{"-e"},
	{"--fair"},
	{"-w", "120"},
	{"-n"},
	{"-n", "-E", "3"},
	{"--deadlock-after", "0"},
	{"--make-dirs"},
	{"--verbose"},
	{"-q"},
	{"--field", "k=v"},
	{"--lock-file", "other.lock"},
	{"--name", "counter"},
	{"--protocol", "dir"},
	{"--protocol", "dir", "-w", "120"},
}

// TestUpdateParallelIncrementsUnderEveryFlag: 20 `hold update` increments
// at once, under each way of taking the lock that update accepts, end
// with the counter at exactly the number that succeeded (exit 0); those
// that did not are -n's busy refusals (exit 1, or -E), which change
// nothing.
func TestUpdateParallelIncrementsUnderEveryFlag(t *testing.T) {
	t.Parallel()
	for _, flags := range guardedFlagVariants {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "c.json")
			os.WriteFile(file, []byte(`{"n":0}`+"\n"), 0o644)
			args := append(append([]string{"update"}, flags...), "c.json", "--", "sh", "-c", incrementFilter)
			ok := parallelHold(t, dir, 20, args)
			if got, want := readFile(t, file), fmt.Sprintf(`{"n":%d}`+"\n", ok); got != want {
				t.Errorf("hold %v, 20 at once, %d succeeded: counter %q, want %q: updates were lost", args, ok, got, want)
			}
			if len(flags) == 0 && ok != 20 {
				t.Errorf("hold %v: %d of 20 waiting updates succeeded", args, ok)
			}
		})
	}
}

// TestAppendParallelUnderEveryFlag: the same for `hold append`: each
// append that succeeded left its line, whole, exactly once.
func TestAppendParallelUnderEveryFlag(t *testing.T) {
	t.Parallel()
	for _, flags := range guardedFlagVariants {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			dir := t.TempDir()
			args := append(append([]string{"append"}, flags...), "log", "a line of some length")
			ok := parallelHold(t, dir, 20, args)
			got := readFile(t, filepath.Join(dir, "log"))
			if want := strings.Repeat("a line of some length\n", ok); got != want {
				t.Errorf("hold %v, 20 at once, %d succeeded: the file has %d bytes, want %d", args, ok, len(got), len(want))
			}
		})
	}
}

// parallelHold runs hold with args n times at once in dir, with a named
// lock directory of the test's own, and returns how many exited 0. Any
// other outcome than 0 or a busy lock (1, or 3 for the -E 3 case) fails
// the test.
func parallelHold(t *testing.T, dir string, n int, args []string) int {
	t.Helper()
	env := []string{nameddir.TestEnv + "=" + filepath.Join(dir, "named")}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ok := 0
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := runHoldEnv(t, dir, env, args...)
			mu.Lock()
			defer mu.Unlock()
			switch r.code {
			case 0:
				ok++
			case exitConflict, 3:
			default:
				t.Errorf("hold %v: exit %d: %s", args, r.code, r.stderr)
			}
		}()
	}
	wg.Wait()
	return ok
}
