package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/hold-dev/hold/internal/lockspec"
)

// TestWhereRunSaysWhatItLocks: hold run F locks F.lock, not F, so a
// flock(1) user of F does not exclude it. The three places a newcomer reads
// first say so (the README's first paragraph, hold run --help, the top of
// docs/cli.md), and none calls hold run "like flock(1)" without it.
func TestWhereRunSaysWhatItLocks(t *testing.T) {
	var brief bytes.Buffer
	printCommandHelp(&brief, flagSetOf(commands["run"]), false)
	if !strings.Contains(brief.String(), "flock TARGET.lock") || strings.Contains(brief.String(), "like flock(1)") {
		t.Errorf("hold run --help does not say that flock(1) users lock TARGET.lock:\n%s", brief.String())
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(readme), "\n\n")
	first, _, _ := strings.Cut(rest, "\n\n")
	if !strings.Contains(first, "`hold run F` locks `F.lock`") || !strings.Contains(first, "`flock F.lock`") {
		t.Errorf("the README's first paragraph does not say that hold run F locks F.lock:\n%s", first)
	}
	cli, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	top, _, _ := strings.Cut(string(cli), "\n## ")
	if !strings.Contains(top, "`flock F.lock`") || !strings.Contains(top, "--lock-file F") {
		t.Errorf("docs/cli.md's top does not say which file flock(1) users lock:\n%s", top)
	}
}

// TestFlockShapedLineHints: a command line in flock(1)'s shape, with its
// flags first (hold -w 5 T -- CMD) or its file first (hold FILE CMD), is
// refused with the hold run line that does it, as given, seconds and all.
func TestFlockShapedLineHints(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-w", "5", "t", "--", "true"}, "hold run -w 5 t -- true"},
		{[]string{"-w", "5", "t", "--", "ls"}, "hold run -w 5 t -- ls"},
		{[]string{"/var/lock/x.lock", "cmd"}, "hold run /var/lock/x.lock cmd"},
		{[]string{"x.lock", "sh", "-c", "echo $x"}, "hold run x.lock sh -c 'echo $x'"},
		{[]string{"-n", "run", "T"}, "hold run -n ..."},
		{[]string{"stauts", "T"}, "did you mean 'hold status'"},
	} {
		if got := unknownCommand(c.args); !strings.Contains(got, c.want) {
			t.Errorf("hold %q: %s\nwant it to say %q", c.args, got, c.want)
		}
	}
}

// TestHelpLinesFitAndFlow: no line of any command's full help (hold help
// CMD, which the man page is made of) passes 100 columns, and no
// paragraph breaks a line early, mid-sentence: every line of a paragraph
// of prose but its last is at least half as wide as the text is wrapped
// (issue 59: "... another process. The command runs" then "with the lock
// held, ...").
func TestHelpLinesFitAndFlow(t *testing.T) {
	t.Setenv(lockspec.ProtocolEnv, "")
	for _, name := range visibleCommands() {
		c := commands[name]
		var full bytes.Buffer
		printCommandHelp(&full, flagSetOf(c), true)
		for _, l := range strings.Split(full.String(), "\n") {
			if len(l) > 100 {
				t.Errorf("hold help %s: a line of %d columns: %q", name, len(l), l)
			}
		}
		for _, par := range strings.Split(c.help, "\n\n") {
			lines := strings.Split(strings.Trim(par, "\n"), "\n")
			for i, l := range lines[:len(lines)-1] {
				next := lines[i+1]
				if strings.HasPrefix(l, " ") || strings.HasPrefix(next, " ") || strings.HasSuffix(l, ":") {
					continue // an example, a list, or what introduces one
				}
				if len(l) < 38 {
					t.Errorf("hold help %s breaks a line early, mid-paragraph: %q, then %q", name, l, next)
				}
			}
		}
	}
}
