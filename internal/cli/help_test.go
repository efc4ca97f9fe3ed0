package cli

import (
	"bytes"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hold-dev/hold/internal/gnuflag"

	"github.com/hold-dev/hold/internal/lockspec"
)

// flagLine matches a flag's line in the Flags section of --help:
// "  -n, --nonblock   ..." or "      --nb   ...".
var flagLine = regexp.MustCompile(`^  (?:-\w, |    )--([\w-]+)`)

// listedFlags returns the long names of the flags that help lists.
func listedFlags(help string) []string {
	_, rest, _ := strings.Cut(help, "\nFlags:\n")
	section, _, _ := strings.Cut(rest, "\n\n")
	var names []string
	for _, line := range strings.Split(section, "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
		}
	}
	slices.Sort(names)
	return names
}

// flagEntries returns the Flags section of help, one flag per string, its
// continuation lines joined.
func flagEntries(help string) []string {
	_, rest, _ := strings.Cut(help, "\nFlags:\n")
	section, _, _ := strings.Cut(rest, "\n\n")
	var entries []string
	for _, line := range strings.Split(section, "\n") {
		if flagLine.MatchString(line) || len(entries) == 0 {
			entries = append(entries, line)
		} else {
			entries[len(entries)-1] += " " + strings.TrimSpace(line)
		}
	}
	return entries
}

// TestHelpListsExactlyTheAcceptedFlags: every command's full help (hold
// help CMD) lists every flag the command accepts (no hidden ones: --nb and
// --timeout are listed as flock(1)'s names) and no flag it does not (update and append do not
// take --shared; status, break and ls do not take the waiting flags), and
// each default is said once.
func TestHelpListsExactlyTheAcceptedFlags(t *testing.T) {
	t.Setenv(lockspec.ProtocolEnv, "") // the built-in defaults, as documentedDefaults shows them
	for _, name := range visibleCommands() {
		fs := flagSetOf(commands[name])
		var accepted []string
		fs.VisitAll(func(f *gnuflag.Flag) { accepted = append(accepted, f.Name) })
		slices.Sort(accepted)
		var help bytes.Buffer
		printCommandHelp(&help, fs, true)
		if listed := listedFlags(help.String()); !slices.Equal(listed, accepted) {
			t.Errorf("hold %s --help lists %v, but the command accepts %v", name, listed, accepted)
		}
		for _, entry := range flagEntries(help.String()) {
			if strings.Count(entry, "(default") > 1 {
				t.Errorf("hold %s --help says a default twice: %q", name, entry)
			}
		}
	}
	for cmd, notAccepted := range map[string][]string{
		"update": {"shared", "slots"}, "append": {"shared", "slots"},
		"status": {"fair", "wait", "nonblock", "shared"}, "break": {"fair", "wait", "nonblock", "shared"},
		"ls": {"fair", "wait", "lock-file"},
	} {
		fs := flagSetOf(commands[cmd])
		for _, f := range notAccepted {
			if fs.Lookup(f) != nil {
				t.Errorf("hold %s accepts --%s, which does not apply to it", cmd, f)
			}
		}
	}
	for _, f := range []string{"nb", "timeout", "nonblock", "wait"} {
		if flagSetOf(commands["run"]).Lookup(f) == nil {
			t.Errorf("hold run does not accept --%s", f)
		}
	}
}

// TestFirstScreens: hold run --help and hold --help each fit one screen
// (40 lines of at most 100 columns). hold run --help shows the usage,
// every flag hold run shares with flock(1), the most used of hold's own,
// the exit statuses and where the rest is; hold --help every command and
// the exit statuses. The full texts keep what the first screens leave out.
func TestFirstScreens(t *testing.T) {
	t.Setenv(lockspec.ProtocolEnv, "")
	fitsAScreen := func(what, text string) {
		t.Helper()
		lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
		if len(lines) > 40 {
			t.Errorf("%s is %d lines, more than a screen (40):\n%s", what, len(lines), text)
		}
		for _, l := range lines {
			if len(l) > 100 || strings.HasSuffix(l, " ") {
				t.Errorf("%s: line %q is wider than 100 columns or ends in a space", what, l)
			}
		}
	}
	run := commands["run"]
	fs := flagSetOf(run)
	var brief, full bytes.Buffer
	printCommandHelp(&brief, fs, false)
	printCommandHelp(&full, fs, true)
	fitsAScreen("hold run --help", brief.String())
	for _, want := range []string{
		"hold run [flags] TARGET -- COMMAND [ARGS...]", "-n, --nonblock", "-w, --wait SECONDS", "-s, --shared",
		"-x, --exclusive", "-u, --unlock", "-E, --conflict-exit-code N", "-o, --close", "-c, --command",
		"-F, --no-fork", "--verbose", "--lock-file PATH", "--name NAME", "--protocol NAME", "--slots N", "--fair",
		"-q, --quiet", "--kill-after",
		"Exit status:", "  70     deadlock", "'hold help run'",
	} {
		if !strings.Contains(brief.String(), want) {
			t.Errorf("hold run --help lacks %q:\n%s", want, brief.String())
		}
	}
	var listed []string
	for _, l := range strings.Split(brief.String(), "\n") {
		if m := flagLine.FindStringSubmatch(l); m != nil {
			listed = append(listed, m[1])
		}
	}
	if len(listed) != 17 {
		t.Errorf("hold run --help lists %d flags, want the 10 of flock(1) and 7 of hold's: %v", len(listed), listed)
	}
	if !strings.Contains(full.String(), "Lock lifetime:") || !strings.Contains(full.String(), "--etcd-ca") {
		t.Errorf("hold help run lost its full text:\n%s", full.String())
	}

	var usage bytes.Buffer
	printUsage(&usage)
	fitsAScreen("hold --help", usage.String())
	for _, name := range visibleCommands() {
		if !regexp.MustCompile(`(?m)^  ` + name + ` +\S`).MatchString(usage.String()) {
			t.Errorf("hold --help does not list %s:\n%s", name, usage.String())
		}
	}
	for _, e := range exitStatuses {
		if !strings.Contains(usage.String(), "  "+e.code+" ") || !strings.Contains(exitCodeHelp, "  "+e.code+" ") {
			t.Errorf("exit status %s is missing from hold --help or the man page's table", e.code)
		}
	}
}
