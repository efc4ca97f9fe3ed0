//go:build unix

package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hold-dev/hold/internal/nameddir"
	"github.com/hold-dev/hold/internal/testenv"
)

// TestKillAfterOutOfRange: a --kill-after that is not a number, or too
// long for hold to count, is refused as what it is, not as a negative
// duration.
func TestKillAfterOutOfRange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for v, want := range map[string]string{
		"1e10":           "too long",
		"9223372037":     "too long",
		"inf":            "too long",
		"1e400":          "too long",
		"999999999999h":  "too long",
		"NaN":            "not a number",
		"-1":             "negative",
		"-2s":            "negative",
		"soon":           "not a duration",
		"9223372036.9":   "too long",
		"2562048h":       "too long",
		"1.5":            "",
		"2562047h":       "",
		"9223372035.999": "",
	} {
		r := runHold(t, dir, "run", "--kill-after", v, "T", "--", "true")
		if want == "" {
			if r.code != 0 {
				t.Errorf("--kill-after %s: exit %d: %s", v, r.code, r.stderr)
			}
			continue
		}
		if r.code != exitUsage || !strings.Contains(r.stderr, want) {
			t.Errorf("--kill-after %s: exit %d, want %d and a message saying %q: %s", v, r.code, exitUsage, want, r.stderr)
		}
		if want != "negative" && strings.Contains(r.stderr, "negative") {
			t.Errorf("--kill-after %s is called negative: %s", v, r.stderr)
		}
	}
}

// TestSharedRefusedByExclusiveProtocol: -s with a protocol that has
// exclusive locks only is a usage error, before anything runs, and the
// message says which protocols have shared locks.
func TestSharedRefusedByExclusiveProtocol(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := runHold(t, dir, "run", "-s", "--protocol", "dir", "T", "--", "touch", "ran")
	if r.code != exitUsage || !strings.Contains(r.stderr, "exclusive locks only") || !strings.Contains(r.stderr, "kernel locks") {
		t.Errorf("hold run -s --protocol dir: exit %d, want %d and a message naming the kernel locks' shared ones: %s", r.code, exitUsage, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); err == nil {
		t.Error("the command ran")
	}
	if r := runHold(t, dir, "run", "-s", "T", "--", "true"); r.code != 0 {
		t.Errorf("hold run -s with kernel locks: exit %d: %s", r.code, r.stderr)
	}
}

// TestUpdateEmptyOutputStatus: a filter that prints nothing leaves FILE
// as it was and exits with the documented status of a command line to
// change (64), not 65 (a lock unusable or lost); --allow-empty accepts it.
func TestUpdateEmptyOutputStatus(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := filepath.Join(dir, "list.txt")
	os.WriteFile(f, []byte("done: a\n"), 0o644)
	r := runHold(t, dir, "update", "list.txt", "--", "sed", "/done/d")
	if r.code != exitEmptyOutput || exitEmptyOutput == exitLockError || !strings.Contains(r.stderr, "--allow-empty") {
		t.Errorf("an empty filter output: exit %d, want %d naming --allow-empty: %s", r.code, exitEmptyOutput, r.stderr)
	}
	if got := readFile(t, f); got != "done: a\n" {
		t.Errorf("the refused update changed the file: %q", got)
	}
	if !strings.Contains(exitCodeHelp, "printed nothing") {
		t.Error("hold help's exit table does not list an empty filter output")
	}
	if r := runHold(t, dir, "update", "--allow-empty", "list.txt", "--", "sed", "/done/d"); r.code != 0 || readFile(t, f) != "" {
		t.Errorf("--allow-empty: exit %d, file %q: %s", r.code, readFile(t, f), r.stderr)
	}
}

// TestUpdateShellFilter: hold update takes -c 'FILTER' as hold run takes
// -c 'COMMAND', after FILE or before it.
func TestUpdateShellFilter(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := filepath.Join(dir, "todo.txt")
	for _, args := range [][]string{
		{"update", "todo.txt", "-c", "sort -u"},
		{"update", "-c", "sort -u", "todo.txt"},
		{"update", "--command", "sort -u | tr a-z A-Z", "todo.txt"},
	} {
		os.WriteFile(f, []byte("b\na\nb\n"), 0o644)
		r := runHold(t, dir, args...)
		want := "a\nb\n"
		if strings.Contains(strings.Join(args, " "), "tr") {
			want = "A\nB\n"
		}
		if r.code != 0 || readFile(t, f) != want {
			t.Errorf("hold %q: exit %d, file %q, want %q: %s", args, r.code, readFile(t, f), want, r.stderr)
		}
	}
	for _, args := range [][]string{
		{"update", "todo.txt", "-c"},
		{"update", "todo.txt", "-c", "sort", "extra"},
		{"update", "-c", "sort", "todo.txt", "-c", "sort"},
		{"update", "-c", "", "todo.txt"},
	} {
		if r := runHold(t, dir, args...); r.code != exitUsage {
			t.Errorf("hold %q: exit %d, want %d: %s", args, r.code, exitUsage, r.stderr)
		}
	}
}

// TestHelpUnknownCommand: `hold help NOSUCH` is a usage error naming the
// command, and a near miss of a command or a flag is named.
func TestHelpUnknownCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runHold(t, dir, "help", "nosuch"); r.code != exitUsage || !strings.Contains(r.stderr, `"nosuch"`) || r.stdout != "" {
		t.Errorf("hold help nosuch: exit %d, want %d and the unknown command named: %s%s", r.code, exitUsage, r.stdout, r.stderr)
	}
	if r := runHold(t, dir, "help", "run"); r.code != 0 || !strings.Contains(r.stdout, "Usage:") {
		t.Errorf("hold help run: exit %d: %s", r.code, r.stderr)
	}
	for args, want := range map[string]string{
		"rnu":                     "hold run",
		"stauts x":                "hold status",
		"help updtae":             "hold update",
		"run --nonblok T -- true": "--nonblock",
		"status --jsn T":          "--json",
	} {
		r := runHold(t, dir, strings.Fields(args)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "did you mean") || !strings.Contains(r.stderr, want) {
			t.Errorf("hold %s: exit %d, want %d and did you mean %s: %s", args, r.code, exitUsage, want, r.stderr)
		}
	}
	if r := runHold(t, dir, "frobnicate"); strings.Contains(r.stderr, "did you mean") {
		t.Errorf("hold frobnicate suggests something: %s", r.stderr)
	}
}

// TestStatusMissingDirectory: hold status of a path whose directory does
// not exist says so (exit 66), where it said "free"; in an existing
// directory a lock never taken is still free.
func TestStatusMissingDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, proto := range []string{"flock", "dir"} {
		r := runHold(t, dir, "status", "--protocol", proto, "nodir/x")
		if r.code != exitCannotOpen || !strings.Contains(r.stderr, "nodir does not exist") || strings.Contains(r.stdout, "free") {
			t.Errorf("%s: hold status nodir/x: exit %d, want %d and the missing directory named: %s%s", proto, r.code, exitCannotOpen, r.stdout, r.stderr)
		}
		if r := runHold(t, dir, "status", "--protocol", proto, "x"); r.code != exitStatusFree || !strings.Contains(r.stdout, "free") {
			t.Errorf("%s: hold status x: exit %d: %s%s", proto, r.code, r.stdout, r.stderr)
		}
	}
	// A named lock's directory is made when first needed: a name never
	// used is free.
	named := filepath.Join(dir, "named")
	r := runHoldEnv(t, dir, []string{nameddir.TestEnv + "=" + named}, "status", "--name", "never-used")
	if r.code != exitStatusFree || !strings.Contains(r.stdout, "free") {
		t.Errorf("hold status --name never-used: exit %d: %s%s", r.code, r.stdout, r.stderr)
	}
}

// TestPlantedNamedDirExit66: a named-lock directory that another user
// made, or that others may write, is refused with the status of
// something hold did not create (66), not 65.
func TestPlantedNamedDirExit66(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("making a directory of another user's needs root (CI runs as root)")
	}
	for _, how := range []string{"another user's", "writable by others"} {
		dir := t.TempDir()
		named := filepath.Join(dir, "named")
		os.Mkdir(named, 0o700)
		if how == "another user's" {
			testenv.Lchown(t, named, testenv.Someone, testenv.SomeGroup)
		} else {
			os.Chmod(named, 0o777)
		}
		env := []string{nameddir.TestEnv + "=" + named}
		for _, args := range [][]string{{"run", "--name", "nightly", "--", "true"}, {"status", "--name", "nightly"}} {
			r := runHoldEnv(t, dir, env, args...)
			if r.code != exitCannotOpen || !strings.Contains(r.stderr, named) {
				t.Errorf("%s named-lock directory: hold %s: exit %d, want %d naming %s: %s", how, strings.Join(args, " "), r.code, exitCannotOpen, named, r.stderr)
			}
		}
	}
}

// TestHintsLeadSomewhere: hints that sent the user in a circle. A kernel
// lock on a portable holder's lock directory names --protocol dir (which
// then finds the holder), not --lock-file (which does not exclude it);
// an update that may not write its file's directory does not suggest
// another lock path, which would not help it; no hint names a tool the
// user never heard of.
func TestHintsLeadSomewhere(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	holder, _ := startHold(t, dir, "run", "--protocol", "dir", "P", "-c", gatedCommand)
	waitFor(t, filepath.Join(dir, "ready"))
	r := runHold(t, dir, "run", "-n", "P", "--", "true")
	if r.code == 0 || !strings.Contains(r.stderr, "--protocol dir") || strings.Contains(r.stderr, "career-ops") {
		t.Errorf("hold run -n P against a portable holder: exit %d, want a hint naming --protocol dir: %s", r.code, r.stderr)
	}
	// What the hint names finds the holder; --lock-file does not take it.
	if r := runHold(t, dir, "run", "-n", "--protocol", "dir", "P", "--", "true"); r.code != exitConflict {
		t.Errorf("the hint's hold run -n --protocol dir P: exit %d, want %d (busy): %s", r.code, exitConflict, r.stderr)
	}
	if r := runHold(t, dir, "run", "-n", "--lock-file", "P.lock", "--", "true"); r.code == 0 {
		t.Error("hold run --lock-file P.lock ran beside the portable holder")
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	if code := waitExit(t, holder); code != 0 {
		t.Errorf("the portable holder: exit %d", code)
	}

	if os.Geteuid() != 0 {
		return
	}
	// An update in a directory nobody may write to: as user nobody.
	pub := publicDir(t)
	bin := holdAsNobody(t)
	ro := filepath.Join(pub, "ro")
	os.Mkdir(ro, 0o755)
	os.WriteFile(filepath.Join(ro, "f"), []byte("b\na\n"), 0o666)
	nobody := &syscall.Credential{Uid: testenv.Nobody, Gid: testenv.Nobody}
	r = runHoldAs(t, bin, nobody, pub, "update", "ro/f", "--", "sort")
	if r.code != exitCannotOpen || !strings.Contains(r.stderr, "renames it over") || strings.Contains(r.stderr, "choose a writable place") {
		t.Errorf("an update in a directory nobody may write: exit %d, want %d and a hint that another lock path would not help: %s", r.code, exitCannotOpen, r.stderr)
	}
	// Indeed it would not: with its lock elsewhere, the update still fails.
	if r := runHoldAs(t, bin, nobody, pub, "update", "--lock-file", filepath.Join(pub, "f.lock"), "ro/f", "--", "sort"); r.code == 0 {
		t.Errorf("the update with its lock elsewhere succeeded: %s", r.stderr)
	}
	// hold run keeps its hint: another lock path does help a command.
	if r := runHoldAs(t, bin, nobody, pub, "run", "ro/f", "--", "true"); r.code != exitCannotOpen || !strings.Contains(r.stderr, "--lock-file") {
		t.Errorf("hold run in a directory nobody may write: exit %d: %s", r.code, r.stderr)
	}
}

// TestHelpTextsHangTogether: hold help run ends with its "Not
// supported" paragraph, the platform's notes sitting in the indented
// "Lock lifetime" section they continue; hold demo --help names its
// values as its usage line does; hold demo -n 1 counts in the singular
// and explains no lost records that were not lost.
func TestHelpTextsHangTogether(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	help := runHold(t, dir, "help", "run").stdout
	lines := strings.Split(strings.TrimRight(help, "\n"), "\n")
	notSupported := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "Not supported:") {
			notSupported = i
		}
	}
	if notSupported < 0 {
		t.Fatalf("hold help run has no Not supported paragraph:\n%s", help)
	}
	for _, l := range lines[notSupported:] {
		if strings.HasPrefix(l, "  ") || l == "" {
			t.Errorf("hold help run: %q hangs under Not supported:\n%s", l, strings.Join(lines[notSupported:], "\n"))
		}
	}
	lifetime := strings.Index(help, "Lock lifetime:")
	messages := strings.Index(help, "\nMessages:")
	if tree := strings.Index(help, strings.TrimSpace(treeHelp)); tree < lifetime || tree > messages {
		t.Errorf("hold help run: the notes on stopping the command are not in Lock lifetime")
	}

	demo := runHold(t, dir, "demo", "--help").stdout
	for _, flag := range []string{"--writers WRITERS", "--records RECORDS", "[-n WRITERS] [-m RECORDS]"} {
		if !strings.Contains(demo, flag) {
			t.Errorf("hold demo --help lacks %q:\n%s", flag, demo)
		}
	}
	r := runHold(t, dir, "demo", "-n", "1", "-m", "3")
	if r.code != 0 || !strings.Contains(r.stdout, "1 writer process adds 3 records") || strings.Contains(r.stdout, "processes") ||
		strings.Contains(r.stdout, "overwrite each other") {
		t.Errorf("hold demo -n 1: exit %d:\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestNameMessages: an empty --name is said to be empty, not a missing
// TARGET; a refused name says what is wrong with it, and the name it
// suggests is one hold takes.
func TestNameMessages(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{nameddir.TestEnv + "=" + filepath.Join(dir, "named")}
	for _, args := range [][]string{{"run", "--name", "", "--", "true"}, {"status", "--name", ""}, {"run", "--lock-file", "", "--", "true"}} {
		r := runHoldEnv(t, dir, env, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "empty") || strings.Contains(r.stderr, "no TARGET") {
			t.Errorf("hold %q: exit %d, want %d saying the value is empty: %s", args, r.code, exitUsage, r.stderr)
		}
	}
	for name, want := range map[string]string{".hidden": "hidden", "Nightly": "nightly", "-x": "x"} {
		r := runHoldEnv(t, dir, env, "run", "--name", name, "--", "true")
		if r.code != exitUsage || !strings.Contains(r.stderr, fmt.Sprintf("say %q", want)) {
			t.Errorf("--name %s: exit %d, want %d suggesting %q: %s", name, r.code, exitUsage, want, r.stderr)
			continue
		}
		if r := runHoldEnv(t, dir, env, "run", "--name", want, "--", "true"); r.code != 0 {
			t.Errorf("the suggested --name %s: exit %d: %s", want, r.code, r.stderr)
		}
	}
	if r := runHoldEnv(t, dir, env, "run", "--name", ".hidden", "--", "true"); !strings.Contains(r.stderr, "starts with '.'") {
		t.Errorf("--name .hidden does not say the leading dot is the problem: %s", r.stderr)
	}
}

// TestDescriptorFormAppendKeepsToken: what the help and docs/cli.md say
// beside the descriptor form: a lock file opened with >> keeps the fencing
// token hold keeps in it, one opened with > is emptied and counts from 1
// again; both texts show >>.
func TestDescriptorFormAppendKeepsToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := `set -e
"$0" run G -- true; "$0" run G -- true
( "$0" run -n 9 || exit 1; true ) 9>>G.lock
"$0" run G -- sh -c 'echo "append $HOLD_TOKEN"'
( "$0" run -n 9 || exit 1; true ) 9>G.lock
"$0" run G -- sh -c 'echo "truncate $HOLD_TOKEN"'`
	out, err := exec.Command("sh", "-c", "cd '"+dir+"' && sh -c \"$1\" \"$2\"", "sh", script, holdBin).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// Tokens 1 and 2, then the descriptor form's own 3 with >>, so 4;
	// with > the file is emptied first: the descriptor form's 1, then 2.
	if got := string(out); !strings.Contains(got, "append 4\n") || !strings.Contains(got, "truncate 2\n") {
		t.Errorf("tokens after 9>> and 9>: %q, want 4 (kept) and 2 (restarted)", got)
	}
	help := runHold(t, dir, "help", "run").stdout
	docs := readFile(t, "../../docs/cli.md")
	for what, text := range map[string]string{"hold run --help": help, "docs/cli.md": docs} {
		if !strings.Contains(text, "9>>F") || !strings.Contains(text, "from 1") {
			t.Errorf("%s does not say to open the descriptor form's file with >>", what)
		}
	}
}
