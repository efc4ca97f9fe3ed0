//go:build unix

package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/internal/testenv"
)

// committedMan is the man page in the source tree.
const committedMan = "../../docs/hold.1"

func TestManPageIsUpToDate(t *testing.T) {
	t.Parallel()
	// The page must not depend on the environment of whoever generates it.
	r := runHoldEnv(t, t.TempDir(), []string{lockspec.ProtocolEnv + "=dir"}, "man")
	if r.code != 0 {
		t.Fatalf("hold man: exit %d: %s", r.code, r.stderr)
	}
	committed, err := os.ReadFile(committedMan)
	if err != nil {
		t.Fatal(err)
	}
	if r.stdout != string(committed) {
		t.Fatalf("docs/hold.1 is out of date with hold's --help text; regenerate it with\n\tgo run ./cmd/hold man > docs/hold.1")
	}
}

func TestManPageRenders(t *testing.T) {
	t.Parallel()
	man := testenv.LookPath(t, "man", "man(1) is not installed (man-db)")
	cmd := exec.CommandContext(context.Background(), man, "--warnings", "-l", committedMan)
	cmd.Env = append(os.Environ(), "MANWIDTH=100", "MANPAGER=cat", "PAGER=cat", "LC_ALL=C")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("man -l docs/hold.1: %v\n%s", err, errb.String())
	}
	if errb.Len() > 0 {
		t.Errorf("man -l docs/hold.1 warns:\n%s", errb.String())
	}
	text := out.String()
	// troff hyphenates words at line ends; join them for the search.
	text = regexp.MustCompile(`-\n\s+`).ReplaceAllString(text, "-")
	for _, want := range append(visibleCommands(), "EXIT STATUS", "ENVIRONMENT", "--nonblock", "--recursive", "HOLD_DEBUG", "66") {
		if !strings.Contains(text, want) {
			t.Errorf("the rendered man page lacks %q", want)
		}
	}
	for _, name := range visibleCommands() {
		if !strings.Contains(text, "hold "+name) {
			t.Errorf("the rendered man page has no section for hold %s", name)
		}
	}
}

// Every environment variable hold reads or sets for users is documented:
// the names in the command's and the portable protocol's sources.
func TestManPageNamesEveryVariable(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(committedMan)
	if err != nil {
		t.Fatal(err)
	}
	internal := map[string]bool{lockspec.RemoteEnv: true, stallEnv: true}
	var sources []string
	for _, glob := range []string{"*.go", "../dirlock/config.go"} {
		m, _ := filepath.Glob(glob)
		sources = append(sources, m...)
	}
	name := regexp.MustCompile(`HOLD_[A-Z_]*[A-Z]`)
	for _, src := range sources {
		if strings.HasSuffix(src, "_test.go") {
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range name.FindAllString(string(b), -1) {
			if !internal[v] && !strings.Contains(string(page), v) {
				t.Errorf("%s (named in %s) is not in docs/hold.1's ENVIRONMENT", v, src)
			}
		}
	}
}
