//go:build linux

package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// flockIdiom is one way flock(1) is used, written once for flock(1) and
// once for hold ([0] is flock(1)'s, [1] hold's). Both run with bash -c (the man page's exec 200>F is bash's) in one
// directory, with F a lock file, D a directory and BODY a shell command:
// hold runs BODY under the lock; try attempts the lock without waiting
// (or waiting briefly) and does nothing with it.
type flockIdiom struct {
	name      string
	hold, try [2]string
	// busy is the exit status of try while either tool holds the lock.
	busy int
}

// selfLockingScript locks itself with flock(1)'s man-page header, the
// header written for flock(1) or for hold as TOOL says. Either way the
// lock is on the script itself, which keeps running.
const selfLockingScript = `#!/bin/sh
if [ "$TOOL" = flock ]; then
[ "${FLOCKER}" != "$0" ] && exec env FLOCKER="$0" flock -en "$0" "$0" "$@" || :
else
[ "${FLOCKER}" != "$0" ] && exec env FLOCKER="$0" hold run -n --lock-file "$0" -- "$0" "$@" || :
fi
sh -c "$BODY"
`

// flockIdioms are flock(1)'s man-page examples, the cron line and the
// other forms, each with its hold counterpart.
var flockIdioms = []flockIdiom{
	{name: "cron -n",
		hold: [2]string{`flock -n x.lock sh -c "$BODY"`, `hold run -n x.lock sh -c "$BODY"`},
		try:  [2]string{`flock -n x.lock true`, `hold run -n x.lock true`}, busy: 1},
	{name: "cron -n, absolute path",
		hold: [2]string{`flock -n "$PWD/x.lock" sh -c "$BODY"`, `hold run -n "$PWD/x.lock" sh -c "$BODY"`},
		try:  [2]string{`flock -n "$PWD/x.lock" true`, `hold run -n "$PWD/x.lock" true`}, busy: 1},
	{name: "directory -c, -w .007 (man page)",
		hold: [2]string{`flock "$D" -c "$BODY"`, `hold run --lock-file "$D" -c "$BODY"`},
		try:  [2]string{`flock -w .007 "$D" -c echo`, `hold run -w .007 --lock-file "$D" -c echo`}, busy: 1},
	{name: "shared with shared (man page)",
		hold: [2]string{`flock -s "$D" -c "$BODY"`, `hold run -s --lock-file "$D" -c "$BODY"`},
		try:  [2]string{`flock -s -w .007 "$D" -c echo`, `hold run -s -w .007 --lock-file "$D" -c echo`}, busy: 0},
	{name: "exclusive against shared",
		hold: [2]string{`flock -s F -c "$BODY"`, `hold run -s --lock-file F -c "$BODY"`},
		try:  [2]string{`flock -x -n F true`, `hold run -x -n --lock-file F -- true`}, busy: 1},
	{name: "-x FILE, -en",
		hold: [2]string{`flock -x F sh -c "$BODY"`, `hold run -x --lock-file F -- sh -c "$BODY"`},
		try:  [2]string{`flock -en F true`, `hold run -en --lock-file F -- true`}, busy: 1},
	{name: "-o",
		hold: [2]string{`flock -o F -c "$BODY"`, `hold run -o --lock-file F -c "$BODY"`},
		try:  [2]string{`flock -n F true`, `hold run -n --lock-file F -- true`}, busy: 1},
	{name: "-E",
		hold: [2]string{`flock F -c "$BODY"`, `hold run --lock-file F -c "$BODY"`},
		try:  [2]string{`flock -E 42 -n F true`, `hold run -E 42 -n --lock-file F -- true`}, busy: 42},
	{name: "-w",
		hold: [2]string{`flock F -c "$BODY"`, `hold run --lock-file F -c "$BODY"`},
		try:  [2]string{`flock -w 0.3 F true`, `hold run -w 0.3 --lock-file F -- true`}, busy: 1},
	{name: "-F",
		hold: [2]string{`flock -F F sh -c "$BODY"`, `hold run -F --lock-file F -- sh -c "$BODY"`},
		try:  [2]string{`flock -n F true`, `hold run -n --lock-file F -- true`}, busy: 1},
	{name: "exec 200>F; -n 200",
		hold: [2]string{`exec 200>F; flock -n 200 || exit 1; sh -c "$BODY"`, `exec 200>F; hold run -n 200 || exit 1; sh -c "$BODY"`},
		try:  [2]string{`exec 200>F; flock -n 200`, `exec 200>F; hold run -n 200`}, busy: 1},
	{name: "exec 4<>F; -w 4",
		hold: [2]string{`exec 4<>F; flock 4; sh -c "$BODY"`, `exec 4<>F; hold run 4; sh -c "$BODY"`},
		try:  [2]string{`exec 4<>F; flock -w 0.2 4`, `exec 4<>F; hold run -w 0.2 4`}, busy: 1},
	{name: "( -n 9 || exit 1; ... ) 9>F (man page)",
		hold: [2]string{`( flock -n 9 || exit 1; sh -c "$BODY" ) 9>F`, `( hold run -n 9 || exit 1; sh -c "$BODY" ) 9>F`},
		try:  [2]string{`( flock -n 9 || exit 1; true ) 9>F`, `( hold run -n 9 || exit 1; true ) 9>F`}, busy: 1},
	{name: "9 ... -u 9",
		// The lock is dropped before BODY runs: try finds it free.
		hold: [2]string{`exec 9>F; flock 9 && flock -u 9 && sh -c "$BODY"`, `exec 9>F; hold run 9 && hold run -u 9 && sh -c "$BODY"`},
		try:  [2]string{`flock -n F true`, `hold run -n --lock-file F -- true`}, busy: 0},
	{name: "self-locking script (man page)",
		hold: [2]string{`TOOL=flock ./self.sh`, `TOOL=hold ./self.sh`},
		try:  [2]string{`BODY=true TOOL=flock ./self.sh`, `BODY=true TOOL=hold ./self.sh`}, busy: 1},
}

// toolNames names the two tools in messages.
var toolNames = [2]string{"flock(1)", "hold"}

// Issue 29: every flock(1) idiom has a hold form that takes the same lock
// on the same files. While either tool holds it, both tools' tries get the
// same exit status and print nothing (stderr is not a terminal here); with
// nothing held, both tries succeed.
func TestFlockIdiomsExcludeEachOther(t *testing.T) {
	t.Parallel()
	testenv.LookPath(t, "flock", "flock(1) is not installed (util-linux): hold cannot be checked against it")
	for _, id := range flockIdioms {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "D"), 0o755); err != nil {
				t.Fatal(err)
			}
			// A directory of the user's, not empty, as /tmp is.
			if err := os.WriteFile(filepath.Join(dir, "D", "data"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "self.sh"), []byte(selfLockingScript), 0o755); err != nil {
				t.Fatal(err)
			}
			for tool := range 2 {
				if r := shellRun(t, dir, id.try[tool], "true"); r.code != 0 || r.stderr != "" {
					t.Fatalf("%s, nothing held: %s: exit %d, stderr %q; want 0", toolNames[tool], id.try[tool], r.code, r.stderr)
				}
			}
			for holder := range 2 {
				stop := shellHold(t, dir, id.hold[holder])
				var got [2]result
				for tool := range 2 {
					got[tool] = shellRun(t, dir, id.try[tool], "true")
				}
				stop()
				for tool := range 2 {
					if got[tool].code != id.busy || got[tool].stderr != "" {
						t.Errorf("while %s held it (%s): %s's %s: exit %d, stderr %q; want %d, silent",
							toolNames[holder], id.hold[holder], toolNames[tool], id.try[tool], got[tool].code, got[tool].stderr, id.busy)
					}
				}
			}
		})
	}
}

// idiomEnv is the environment of the idioms' shells: hold on PATH
// (shellEnv), F and D set, BODY as given.
func idiomEnv(dir, body string) []string {
	return append(shellEnv(), "F=F", "D="+filepath.Join(dir, "D"), "BODY="+body)
}

// shellRun runs script with bash -c in dir and waits for it.
func shellRun(t *testing.T, dir, script, body string) result {
	t.Helper()
	return runIn(t, dir, idiomEnv(dir, body), "bash", "-c", script)
}

// shellHold starts script with BODY the gated command and waits until
// BODY runs, that is, until the lock is held. stop lets BODY finish and
// checks that the script exits 0, silently.
func shellHold(t *testing.T, dir, script string) (stop func()) {
	t.Helper()
	for _, f := range []string{"ready", "go"} {
		os.Remove(filepath.Join(dir, f))
	}
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = dir, idiomEnv(dir, gatedCommand)
	errf, err := os.CreateTemp(t.TempDir(), "stderr-")
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	cmd.Stderr = errf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	waitFor(t, filepath.Join(dir, "ready"))
	return func() {
		t.Helper()
		os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
		code := waitExit(t, cmd)
		b, _ := os.ReadFile(errf.Name())
		if code != 0 || len(b) > 0 {
			t.Errorf("%s: exit %d, stderr %q; want 0, silent", script, code, b)
		}
	}
}

// A directory that is a portable-protocol lock is not flocked: a kernel
// lock would not exclude its holder.
func TestLockFileRefusesPortableLockDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, _ := holdCommand(t, dir, "--protocol", "dir")
	r := runHold(t, dir, "run", "--lock-file", "T.lock", "--", "true")
	if r.code != exitCannotOpen || !strings.Contains(r.stderr, "--protocol dir") {
		t.Errorf("hold run --lock-file T.lock while T.lock is a portable lock: exit %d, %s; want %d saying --protocol dir", r.code, r.stderr, exitCannotOpen)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if code := waitExit(t, holder); code != 0 {
		t.Errorf("holder exited %d", code)
	}
}

// Issue 29: what a flock(1) user mistypes or runs into is said in their
// words, in one line where one will do.
func TestFlockUserMessages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "photos.lock"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "photos.lock", "cat.jpg"), []byte("x"), 0o644)
	for _, tc := range []struct {
		name      string
		args      []string
		want      int
		say, deny []string
		oneLine   bool
	}{
		{"-w too large", []string{"run", "-w", "1e10", "T", "--", "true"}, exitUsage, []string{"31 years"}, nil, false},
		{"flags before the command", []string{"-n", "run", "T", "--", "true"}, exitUsage, []string{"flags go after the command: hold run -n"}, nil, true},
		{"cannot create in /proc", []string{"run", "--lock-file", "/proc/hold-test-no-such-file", "--", "true"}, exitCannotOpen,
			[]string{"does not let files be created"}, []string{"does not exist"}, false},
		{"a directory hold did not make", []string{"run", "photos", "--", "true"}, exitCannotOpen, []string{"directory"}, []string{"remove it"}, false},
		{"-u with a command", []string{"run", "-u", "T", "--", "true"}, exitUsage, []string{"hold run -u"}, nil, false},
		{"-F with -o", []string{"run", "-F", "-o", "T", "--", "true"}, exitUsage, []string{"exclude each other"}, nil, false},
		{"a descriptor with --lock-file", []string{"run", "--lock-file", "F", "9"}, exitUsage, []string{"does not apply to a descriptor"}, nil, false},
		{"a descriptor not open", []string{"run", "-n", "9"}, exitLockError, []string{"exec 9>>FILE", "9>>FILE (>> keeps"}, nil, true},
	} {
		r := runHold(t, dir, tc.args...)
		if r.code != tc.want {
			t.Errorf("%s: hold %v: exit %d, want %d: %s", tc.name, tc.args, r.code, tc.want, r.stderr)
		}
		for _, s := range tc.say {
			if !strings.Contains(r.stderr, s) {
				t.Errorf("%s: hold %v: stderr %q does not say %q", tc.name, tc.args, r.stderr, s)
			}
		}
		for _, s := range append(tc.deny, "context deadline exceeded", "context canceled", "in Go)") {
			if strings.Contains(r.stderr, s) {
				t.Errorf("%s: hold %v: stderr %q says %q", tc.name, tc.args, r.stderr, s)
			}
		}
		if tc.oneLine && strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("%s: hold %v: stderr is not one line: %q", tc.name, tc.args, r.stderr)
		}
	}

	// A held lock: a timed-out wait and one ended by a signal say so in
	// words; status names the holder's pid once; ls takes a lock file.
	holder, _ := holdCommand(t, dir)
	pid := fmt.Sprintf("pid %d", holder.Process.Pid)
	r := runHold(t, dir, "run", "--verbose", "-w", "0.2", "T", "--", "true")
	if r.code != exitConflict || !strings.Contains(r.stderr, "timed out") || strings.Contains(r.stderr, "context") {
		t.Errorf("timed-out wait: exit %d, stderr %q", r.code, r.stderr)
	}
	waiter, waiterErr := startHold(t, dir, "run", "T", "--", "true")
	waitBlocked(t, waiter.Process.Pid)
	waiter.Process.Signal(syscall.SIGTERM)
	if code := waitExit(t, waiter); code != 128+int(syscall.SIGTERM) || !strings.Contains(waiterErr(), "gave up waiting") || strings.Contains(waiterErr(), "context") {
		t.Errorf("wait ended by SIGTERM: exit %d, stderr %q", code, waiterErr())
	}
	r = runHold(t, dir, "status", "T")
	if r.code != 0 || strings.Count(r.stdout, pid) != 1 {
		t.Errorf("status names %s %d times, want once:\n%s", pid, strings.Count(r.stdout, pid), r.stdout)
	}
	r = runHold(t, dir, "ls", "T.lock")
	if r.code != 0 || !strings.Contains(r.stdout, "T.lock") || !strings.Contains(r.stdout, pid) {
		t.Errorf("hold ls T.lock: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, holder)
}

// waitBlocked waits until process pid waits in the kernel for a flock
// lock (a "->" line of /proc/locks), bounded by hangLimit.
func waitBlocked(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(hangLimit)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile("/proc/locks")
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) > 5 && f[1] == "->" && f[2] == "FLOCK" && f[5] == fmt.Sprint(pid) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("pid %d did not wait for a lock within %v", pid, hangLimit)
}
