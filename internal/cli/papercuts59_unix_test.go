//go:build unix

package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// TestCommandFoundWithoutPATH: with no PATH at all (env -i, cron, a
// systemd unit), hold run, hold run -F and hold update find the command in
// the system's default path, as execvp(3) does for flock(1); a PATH set
// empty is the caller's choice and finds nothing.
func TestCommandFoundWithoutPATH(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"run", "t", "--", "echo", "hi"},
		{"run", "-F", "t", "--", "echo", "hi"},
	} {
		r := runIn(t, dir, []string{}, holdBin, args...)
		if r.code != 0 || r.stdout != "hi\n" {
			t.Errorf("env -i hold %s: exit %d, stdout %q: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "list"), []byte("b\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := runIn(t, dir, []string{}, holdBin, "update", "list", "--", "sort"); r.code != 0 || readFile(t, filepath.Join(dir, "list")) != "a\nb\n" {
		t.Errorf("env -i hold update list -- sort: exit %d: %s", r.code, r.stderr)
	}
	if r := runIn(t, dir, []string{"PATH="}, holdBin, "run", "t", "--", "echo", "hi"); r.code != exitExecFailed {
		t.Errorf("PATH= hold run t -- echo hi: exit %d, want %d (an empty PATH is searched as it is): %s", r.code, exitExecFailed, r.stderr)
	}
}

// TestLsOneLinePerDotLockTarget: after hold run x.lock, hold ls lists
// one lock for the one resource (x.lock and its companion x.lock.lock),
// free or held, and with flock(1) holding x.lock itself that one line
// names flock(1)'s pid; --all (Linux) lists it once too.
func TestLsOneLinePerDotLockTarget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	locks := func(out string) []string {
		var rows []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
			if f := strings.Fields(l); len(f) > 0 && strings.Contains(f[0], "x.lock") {
				rows = append(rows, l)
			}
		}
		return rows
	}
	if r := runHold(t, dir, "run", "x.lock", "--", "true"); r.code != 0 {
		t.Fatalf("hold run x.lock: exit %d: %s", r.code, r.stderr)
	}
	if rows := locks(runHold(t, dir, "ls", ".").stdout); len(rows) != 1 || !strings.Contains(rows[0], "free") {
		t.Errorf("hold ls after hold run x.lock: %d lines for x.lock, want 1, free: %q", len(rows), rows)
	}
	holder, _ := startHold(t, dir, "run", "x.lock", "-c", gatedCommand)
	waitFor(t, filepath.Join(dir, "ready"))
	rows := locks(runHold(t, dir, "ls", ".").stdout)
	if len(rows) != 1 || !strings.Contains(rows[0], "held exclusive") || !strings.Contains(rows[0], fmt.Sprintf("pid %d", holder.Process.Pid)) {
		t.Errorf("hold ls while hold run x.lock (pid %d) runs: want one line naming it: %q", holder.Process.Pid, rows)
	}
	if runtime.GOOS == "linux" {
		r := runHold(t, dir, "ls", "--all")
		n := 0
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, dir+string(filepath.Separator)+"x.lock") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("hold ls --all lists x.lock %d times, want once:\n%s", n, r.stdout)
		}
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, holder)

	flock := testenv.LookPath(t, "flock", "flock(1) is not installed (util-linux)")
	fl := startGatedFlock(t, flock, dir, "x.lock")
	rows = locks(runHold(t, dir, "ls", ".").stdout)
	if len(rows) != 1 || !strings.Contains(rows[0], "held") || !strings.Contains(rows[0], strconv.Itoa(fl.Process.Pid)) {
		t.Errorf("hold ls while flock(1) (pid %d) holds x.lock: want one line naming it: %q", fl.Process.Pid, rows)
	}
}

// TestMissingDirectoryHintNamesCallersOption: a lock file's missing
// directory is reported with the one way the caller has to make it: the
// command's own --make-dirs (hold append's is hold append --make-dirs),
// and to an agent's Python or Node client its keyword; a client that does
// not say what it is gets every front end's.
func TestMissingDirectoryHintNamesCallersOption(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"append", "nodir/f", "x"},
		{"update", "nodir/f", "--", "cat"},
		{"run", "nodir/f", "--", "true"},
	} {
		r := runHold(t, dir, args...)
		want := "hold " + args[0] + " --make-dirs"
		if r.code != exitCannotOpen || !strings.Contains(r.stderr, want) || strings.Contains(r.stderr, "in Python") {
			t.Errorf("hold %s: exit %d, want %d naming %q only: %s", strings.Join(args, " "), r.code, exitCannotOpen, want, r.stderr)
		}
	}
	for client, want := range map[string]string{
		"app.py, python pid 4200": "make_dirs=True",
		"app.js, node pid 4200":   "makeDirs: true",
		"":                        "make_dirs in Python",
	} {
		cmd := exec.Command(holdBin, "agent", "--for", client)
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(`{"id":1,"op":"acquire","target":"nodir/x"}` + "\n")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hold agent: %v", err)
		}
		var reply struct {
			Error struct{ Message, Hint string }
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if strings.HasPrefix(line, `{"id":1,`) {
				json.Unmarshal([]byte(line), &reply)
			}
		}
		if !strings.Contains(reply.Error.Hint, want) || !strings.Contains(reply.Error.Message, want) {
			t.Errorf("agent for %q: error %+v, want it to name %q", client, reply.Error, want)
		}
		if client != "" && (strings.Contains(reply.Error.Message, "--make-dirs") || strings.Contains(reply.Error.Hint, "--make-dirs")) {
			t.Errorf("agent for %q names the command line's flag: %+v", client, reply.Error)
		}
	}
}

// TestInterruptIgnoredIsTold: a first SIGINT that the command ignores is
// followed by a word that it still runs and how to kill it; the second
// says it kills, and no message claims a grace period ("after 0s") that
// Ctrl-C twice never gave.
func TestInterruptIgnoredIsTold(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd, stderr := startHold(t, dir, "run", "T", "-c", `trap '' INT; touch ready; while [ -e ready ]; do sleep 0.02; done`)
	waitFor(t, filepath.Join(dir, "ready"))
	cmd.Process.Signal(syscall.SIGINT)
	deadline := time.Now().Add(hangLimit)
	for !strings.Contains(stderr(), "still running after the interrupt; interrupt again within") {
		if time.Now().After(deadline) {
			t.Fatalf("no word after an ignored SIGINT: %q", stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Keep pressing: any two within the window kill the command, however
	// slowly a loaded machine delivers them.
	stopPressing := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopPressing:
				return
			case <-time.After(200 * time.Millisecond):
				cmd.Process.Signal(syscall.SIGINT)
			}
		}
	}()
	code := waitExit(t, cmd)
	close(stopPressing)
	if code != exitKilled || !strings.Contains(stderr(), "second interrupt within 2s: killing") || strings.Contains(stderr(), "after 0s") {
		t.Errorf("double SIGINT: exit %d, want %d, and no \"after 0s\": %s", code, exitKilled, stderr())
	}
}

// TestMultiLineCommandShownOnOneLine: the holder of a multi-line -c
// command is shown with its line breaks escaped, in hold status and hold
// ls, and with its secrets masked without losing the ";" after one.
func TestMultiLineCommandShownOnOneLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, _ := startHold(t, dir, "run", "T", "-c", "echo token=$T; true\n"+gatedCommand)
	waitFor(t, filepath.Join(dir, "ready"))
	st := runHold(t, dir, "status", "T").stdout
	ls := runHold(t, dir, "ls", ".").stdout
	if !strings.Contains(st, `echo token=***; true\necho $$ > ready.tmp`) {
		t.Errorf("hold status does not show the command on one line, its secret masked and its ';' kept:\n%s", st)
	}
	if n := strings.Count(strings.TrimSpace(ls), "\n"); n != 1 {
		t.Errorf("hold ls: %d lines, want a header and one lock:\n%s", n+1, ls)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, holder)
}

// TestStatusOfReleasedLockSaysWhatItKnows: a released portable lock is not
// called a kernel lock (its directory is gone; its gate's queue tells),
// a lock path with nothing at it says the protocol named is the one it
// would be taken with, and a free lock's token is the last one given.
func TestStatusOfReleasedLockSaysWhatItKnows(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runHold(t, dir, "run", "--protocol", "dir", "P", "--", "true"); r.code != 0 {
		t.Fatalf("hold run --protocol dir: exit %d: %s", r.code, r.stderr)
	}
	if r := runHold(t, dir, "status", "P"); !strings.Contains(r.stdout, "protocol:  dir") || strings.Contains(r.stdout, "flock") {
		t.Errorf("status of a released portable lock:\n%s", r.stdout)
	}
	if r := runHold(t, dir, "status", "never"); !strings.Contains(r.stdout, "protocol:  flock (nothing at the lock path") {
		t.Errorf("status of a lock never taken:\n%s", r.stdout)
	}
	runHold(t, dir, "run", "K", "--", "true")
	r := runHold(t, dir, "status", "K")
	if !strings.Contains(r.stdout, "protocol:  flock\n") || !strings.Contains(r.stdout, "last token: 1") {
		t.Errorf("status of a released kernel lock:\n%s", r.stdout)
	}
}

// TestUnreadableOwnFileSaysWhatFailed: a yarn.lock whose own mode keeps
// the user out (000) is reported as that file's permissions, not as a
// directory where the lock file cannot be created: its companion
// yarn.lock.lock was created.
func TestUnreadableOwnFileSaysWhatFailed(t *testing.T) {
	needRootCLI(t, "running hold as another user, whom a mode-000 file keeps out")
	bin := holdAsNobody(t)
	dir := filepath.Join(publicDir(t), "work")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	yarn := filepath.Join(dir, "yarn.lock")
	if err := os.WriteFile(yarn, nil, 0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, yarn} {
		if err := os.Chown(p, nobodyID, nobodyID); err != nil {
			t.Fatal(err)
		}
	}
	nobody := &syscall.Credential{Uid: nobodyID, Gid: nobodyID}
	r := runHoldAs(t, bin, nobody, dir, "run", "yarn.lock", "--", "true")
	if r.code != exitCannotOpen || !strings.Contains(r.stderr, "the file exists, but its permissions (----------") || strings.Contains(r.stderr, "create the lock file there") {
		t.Errorf("hold run yarn.lock on a mode-000 yarn.lock: exit %d, want %d and the file's permissions named: %s", r.code, exitCannotOpen, r.stderr)
	}
}
