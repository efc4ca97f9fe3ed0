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

// TestHelpListsExactlyTheAcceptedFlags: every command's --help lists every
// flag the command accepts (no hidden ones: --nb and --timeout are listed
// as flock(1)'s names) and no flag it does not (update and append do not
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
		printCommandHelp(&help, fs)
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
		"update": {"shared"}, "append": {"shared"},
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
