//go:build unix

package doctest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// makesDirMark is what the line of each quick start that makes data/
// says: hold itself never makes a lock's missing directory.
const makesDirMark = "hold never makes a lock's missing directory"

// quickStarts returns the README's quick starts by language (sh, go, js,
// python): the code blocks from the "Quick starts" line to the next
// section.
func quickStarts(t *testing.T) map[string][]string {
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "\nQuick starts ")
	end := strings.Index(text, "\n## Read on")
	if start < 0 || end < start {
		t.Fatal(`README.md has no "Quick starts" paragraph before "## Read on"`)
	}
	blocks, err := parse("README.md", text[start:end])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, b := range blocks {
		if b.setup != nil || b.skip != "" || b.dir != "" {
			t.Errorf("README.md's %s quick start has a doctest marker: it must run as shown", b.lang)
		}
		out[b.lang] = b.text
	}
	for _, lang := range []string{"sh", "go", "js", "python"} {
		if len(out[lang]) == 0 {
			t.Fatalf("README.md has no %s quick start", lang)
		}
	}
	return out
}

// TestReadmeQuickStarts runs each of the README's four quick starts as
// shown, in an empty directory: the shell lines with bash, the Go lines as
// the body of a main function, the Node lines with node (the package from
// js/, as `npm install ../hold/js` installs it), the Python lines with
// python3 (the package from python/src); each must succeed. Then each runs
// again without its line that makes data/: all four must fail the same way,
// saying that the directory does not exist and naming their own option
// that would make it, and none may have made data/. One rule for a lock
// file's missing directory, in the four front ends.
func TestReadmeQuickStarts(t *testing.T) {
	qs := quickStarts(t)
	options := map[string]string{"sh": "--make-dirs", "go": "hold.MakeDirs", "js": "makeDirs", "python": "make_dirs"}
	for _, lang := range []string{"sh", "go", "js", "python"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			lines := qs[lang]
			var without []string
			for _, l := range lines {
				if !strings.Contains(l, makesDirMark) {
					without = append(without, l)
				}
			}
			if len(without) != len(lines)-1 {
				t.Fatalf("the %s quick start has no line (or more than one) saying %q", lang, makesDirMark)
			}
			if !strings.Contains(strings.Join(lines, "\n"), options[lang]) {
				t.Errorf("the %s quick start does not name %s", lang, options[lang])
			}
			dir := t.TempDir()
			if out, err := runQuickStart(t, lang, dir, lines); err != nil {
				t.Fatalf("the %s quick start fails as shown in an empty directory: %v\n%s", lang, err, out)
			}
			if _, err := os.Stat(filepath.Join(dir, "data", "tracker.md.lock")); err != nil {
				t.Errorf("the %s quick start took no lock on data/tracker.md: %v", lang, err)
			}
			dir = t.TempDir()
			out, err := runQuickStart(t, lang, dir, without)
			if err == nil {
				t.Fatalf("the %s quick start without making data/ succeeds: hold made the directory\n%s", lang, out)
			}
			if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
				t.Errorf("the %s quick start without making data/ failed, but data/ was made", lang)
			}
			if !strings.Contains(out, "does not exist") || !strings.Contains(out, options[lang]) {
				t.Errorf("the %s quick start without data/: the error does not say the directory is missing and name %s:\n%s", lang, options[lang], out)
			}
		})
	}
}

// runQuickStart runs lines of the quick start in language lang in dir and
// returns what it printed.
func runQuickStart(t *testing.T, lang, dir string, lines []string) (string, error) {
	code := strings.Join(lines, "\n") + "\n"
	env := append(exampleEnv(t.TempDir()), "HOLD_BIN="+filepath.Join(binDir, "hold"))
	var cmd *exec.Cmd
	ctx, cancel := context.WithTimeout(context.Background(), exampleLimit)
	defer cancel()
	switch lang {
	case "sh":
		testenv.LookPath(t, "bash", "the shell quick start is run with bash")
		cmd = exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", code)
	case "go":
		goTool := testenv.LookPath(t, "go", "the Go quick start is built with it")
		mod := t.TempDir()
		gomod := fmt.Sprintf("module quickstart\n\ngo 1.26.8\n\nrequire github.com/hold-dev/hold v0.0.0\n\nreplace github.com/hold-dev/hold => %s\n", root)
		sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		// The quick start is the body of main as it is, pasted: it
		// must compile so (issue 59: an unused err did not), with
		// the imports it uses.
		prog := "package main\n\nimport (\n" + goImports(code) + "\n\t\"github.com/hold-dev/hold\"\n)\n\n" +
			"func main() {\n" + code + "}\n"
		for name, content := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "main.go": []byte(prog)} {
			if err := os.WriteFile(filepath.Join(mod, name), content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		build := exec.CommandContext(ctx, goTool, "build", "-mod=mod", "-o", filepath.Join(mod, "quickstart"), ".")
		build.Dir = mod
		build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOPROXY=off")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("building the Go quick start: %v\n%s\n%s", err, out, prog)
		}
		cmd = exec.CommandContext(ctx, filepath.Join(mod, "quickstart"))
	case "js":
		node := testenv.LookPath(t, "node", "the Node quick start runs with it (.ci/run installs nodejs)")
		// The package as `npm install ../hold/js` puts it.
		nm := filepath.Join(dir, "node_modules", "@hold-dev")
		if err := os.MkdirAll(nm, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(root, "js"), filepath.Join(nm, "hold")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "quickstart.js"), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd = exec.CommandContext(ctx, node, "quickstart.js")
	case "python":
		py := testenv.LookPath(t, "python3", "the Python quick start runs with it")
		cmd = exec.CommandContext(ctx, py, "-c", code)
		env = append(env, "PYTHONPATH="+filepath.Join(root, "python", "src"), "PYTHONDONTWRITEBYTECODE=1")
	}
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the %s quick start did not finish within %v:\n%s", lang, exampleLimit, out.String())
	}
	return out.String(), err
}

// goImports lists, one import line each, the standard packages of the Go
// quick start that code uses (context.Background, os.WriteFile, ...).
func goImports(code string) string {
	var b strings.Builder
	for _, pkg := range []string{"context", "errors", "fmt", "log", "os", "time"} {
		if strings.Contains(code, pkg+".") {
			fmt.Fprintf(&b, "\t%q\n", pkg)
		}
	}
	return b.String()
}

// TestReadmeInstallSteps runs the README's steps for a hold installed
// from a clone (its PATH and man page lines) with a Go directory of the
// test's own: hold is then found on PATH from that directory, and man
// finds the page installed beside it (man-db looks for the pages of each
// directory on PATH).
func TestReadmeInstallSteps(t *testing.T) {
	bash := testenv.LookPath(t, "bash", "the steps are bash")
	man := testenv.LookPath(t, "man", "the README installs the man page for it (apt package man-db)")
	goTool := testenv.LookPath(t, "go", "the steps ask go for its directory")
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	start := strings.Index(text, "\n## Using it before it is published")
	if start < 0 {
		t.Fatal(`README.md has no "Using it before it is published" section`)
	}
	blocks, err := parse("README.md", text[start:])
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for _, b := range blocks {
		if len(b.text) > 0 && strings.Contains(strings.Join(b.text, "\n"), "hold man >") {
			for _, l := range b.text {
				steps = append(steps, strings.TrimSpace(l))
			}
			break
		}
	}
	if len(steps) == 0 || !strings.Contains(strings.Join(steps, "\n"), "go env GOPATH)/bin") {
		t.Fatalf("README.md does not say how to put Go's bin directory on PATH and install the man page: %q", steps)
	}
	// `go install ./cmd/...` as the README says, here as a copy of the
	// hold just built into a GOPATH of the test's own.
	gopath := t.TempDir()
	if err := os.Mkdir(filepath.Join(gopath, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(binDir, "hold"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gopath, "bin", "hold"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	var script []string
	for _, s := range steps {
		if s == "man hold" {
			s = "man -w hold" // where the page is, not a pager
		}
		script = append(script, s)
	}
	script = append(script, "command -v hold")
	cmd := exec.Command(bash, "-e", "-c", strings.Join(script, "\n"))
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"HOME=" + t.TempDir(), "GOPATH=" + gopath, "GOFLAGS=", "GOCACHE=" + os.Getenv("GOCACHE"),
		"PATH=" + filepath.Dir(goTool) + ":" + filepath.Dir(man) + ":/usr/bin:/bin", "MANPATH="}
	if c := os.Getenv("GOCACHE"); c == "" {
		cmd.Env = append(cmd.Env, "GOCACHE="+filepath.Join(t.TempDir(), "cache"))
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's install steps fail: %v\n%s\n%s", err, strings.Join(script, "\n"), out)
	}
	page := filepath.Join(gopath, "share", "man", "man1", "hold.1")
	if !strings.Contains(string(out), page) || !strings.Contains(string(out), filepath.Join(gopath, "bin", "hold")) {
		t.Errorf("after the README's steps, man and PATH do not find hold in %s:\n%s", gopath, out)
	}
}

// TestReadmePathBeforeFirstHold: the README's first command line that
// runs hold from PATH comes after the step that puts go install's
// directory on PATH (issue 59: it came two sections later).
func TestReadmePathBeforeFirstHold(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	path := strings.Index(text, `export PATH="$PATH:$(go env GOPATH)/bin"`)
	first, at, fenced := -1, 0, false
	for _, line := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		code := fenced || strings.HasPrefix(line, "    ")
		if code && strings.HasPrefix(strings.TrimLeft(line, " "), "hold ") {
			first = at
			break
		}
		at += len(line)
	}
	if path < 0 || first < 0 || path > first {
		t.Errorf("README.md runs hold (at byte %d) before it puts it on PATH (at byte %d)", first, path)
	}
}
