//go:build unix

package doctest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/postgres/pgtest"
)

// How the examples are found and run.
//
// Every fenced block whose info string is empty, sh, shell, bash or
// console, and every indented block, of README.md and docs/*.md is looked
// at. A block is a shell example when its first line (after a "$ " prompt
// and leading VAR=value assignments) starts with one of the commands in
// exampleCommands; in a block with "$ " prompts only the prompted lines are
// commands and the rest is output, which is not compared (it holds pids
// and times). Other blocks (program output, Go, JSON) are not examples.
//
// A command line that is a synopsis, not a command (it has [optional]
// parts or PLACEHOLDER words, like "hold status [--json] TARGET..."), is
// not run; it is checked against `hold help CMD` instead: the command
// must exist and every flag it names must be one the command lists.
//
// The other lines of a block run as one bash script under `set -e -o
// pipefail` in a fresh directory, with the hold just built first on PATH
// and a private named-lock directory (HOLD_TEST_NAMED_DIR, so named
// locks stay out of the user's directory). The
// script must exit 0 within exampleLimit. HTML comments just before a
// block, invisible when the document is rendered, change that:
//
//	<!-- doctest: setup SHELL -->  run SHELL first, in the same script
//	<!-- doctest: needs TOOL... -->  the example runs these programs; where one is
//	                               missing the example is skipped as a test
//	                               for a missing tool is (internal/testenv)
//	<!-- doctest: dir repo -->     run in the module's root, not a fresh directory
//	<!-- doctest: skip REASON -->  do not run the block (its synopses are still
//	                               checked); REASON says why it cannot run in a test

// exampleCommands are the first words that make a block a shell example.
var exampleCommands = []string{"hold", "go", "cd", "npm", "npx", "node", "source", "some-report",
	"for", "echo", "jq", "flock", "export", "mkdir", "HOLD_PROTOCOL=dir"}

// exampleLimit bounds one block's run; it only catches hangs.
const exampleLimit = 3 * time.Minute

// documents are the files whose examples run, relative to the module root.
func documents(t *testing.T) []string {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, docs...)
}

// root is the module's root directory.
var root = func() string {
	abs, err := filepath.Abs("../..")
	if err != nil {
		panic(err)
	}
	return abs
}()

// binDir holds hold, hold-remote and hold-postgres, built by TestMain.
var binDir string

// pgServer is the PostgreSQL server of the examples that need one
// ("<!-- doctest: needs postgresql-server -->"), nil if it could not start.
var pgServer *pgtest.Server

// pgServerTool is the name under which a block asks for pgServer.
const pgServerTool = "postgresql-server"

func TestMain(m *testing.M) {
	code := testenv.RunWithExecutables(m, root, func(dir string) {
		binDir = dir
		// The PostgreSQL examples run against a server of the test's
		// own, which the PG* variables of their environment name.
		if srv, err := pgtest.Start(); err == nil {
			pgServer = srv
		} else if !errors.Is(err, pgtest.ErrNoServer) {
			fmt.Fprintln(os.Stderr, "starting PostgreSQL:", err)
		}
	})
	if pgServer != nil {
		pgServer.Close()
	}
	os.Exit(code)
}

// block is one code block of a document.
type block struct {
	file string // relative to the module root
	line int    // 1-based line of its first line of content
	lang string // a fenced block's info string; "" for an indented one
	text []string

	setup []string
	needs []string
	dir   string
	skip  string
	// markerLine is the line of the first marker, to report one that is
	// not followed by a block.
	markerLine int
}

var markerRE = regexp.MustCompile(`^<!-- doctest: (setup|needs|dir|skip)(?: (.*?))? -->$`)

// parse splits a Markdown document into its code blocks, with the markers
// that precede each.
func parse(file, text string) ([]block, error) {
	lines := strings.Split(text, "\n")
	var (
		blocks  []block
		pending block
		marked  bool
	)
	take := func(b block) {
		b.setup, b.needs, b.dir, b.skip, b.markerLine = pending.setup, pending.needs, pending.dir, pending.skip, pending.markerLine
		blocks = append(blocks, b)
		pending, marked = block{}, false
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if m := markerRE.FindStringSubmatch(trimmed); m != nil {
			if !marked {
				pending.markerLine = i + 1
			}
			marked = true
			switch m[1] {
			case "setup":
				pending.setup = append(pending.setup, m[2])
			case "needs":
				pending.needs = append(pending.needs, strings.Fields(m[2])...)
			case "dir":
				if m[2] != "repo" {
					return nil, fmt.Errorf("%s:%d: doctest: dir takes only \"repo\", not %q", file, i+1, m[2])
				}
				pending.dir = root
			case "skip":
				if strings.TrimSpace(m[2]) == "" {
					return nil, fmt.Errorf("%s:%d: doctest: skip needs a reason", file, i+1)
				}
				pending.skip = m[2]
			}
			continue
		}
		if strings.HasPrefix(trimmed, "<!-- doctest") {
			return nil, fmt.Errorf("%s:%d: malformed doctest marker %q", file, i+1, trimmed)
		}
		if fence, ok := strings.CutPrefix(strings.TrimLeft(line, " "), "```"); ok {
			indent := len(line) - len(strings.TrimLeft(line, " "))
			b := block{file: file, line: i + 2, lang: strings.TrimSpace(fence)}
			for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				b.text = append(b.text, trimIndent(lines[i], indent))
			}
			take(b)
			continue
		}
		prevBlank := i == 0 || strings.TrimSpace(lines[i-1]) == "" || markerRE.MatchString(strings.TrimSpace(lines[i-1]))
		if prevBlank && (strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t")) && trimmed != "" {
			b := block{file: file, line: i + 1}
			for ; i < len(lines); i++ {
				l := lines[i]
				if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "    ") && !strings.HasPrefix(l, "\t") {
					break
				}
				b.text = append(b.text, l)
			}
			i--
			for len(b.text) > 0 && strings.TrimSpace(b.text[len(b.text)-1]) == "" {
				b.text = b.text[:len(b.text)-1]
			}
			indent := len(b.text[0]) - len(strings.TrimLeft(b.text[0], " "))
			for j := range b.text {
				b.text[j] = trimIndent(b.text[j], indent)
			}
			take(b)
			continue
		}
		if trimmed != "" && marked {
			return nil, fmt.Errorf("%s:%d: a doctest marker is not followed by a code block", file, pending.markerLine)
		}
	}
	if marked {
		return nil, fmt.Errorf("%s:%d: a doctest marker is not followed by a code block", file, pending.markerLine)
	}
	return blocks, nil
}

func trimIndent(line string, n int) string {
	for range n {
		if !strings.HasPrefix(line, " ") {
			break
		}
		line = line[1:]
	}
	return line
}

var assignmentRE = regexp.MustCompile(`^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+`)

// firstWord returns a command line's command, after any VAR=value.
func firstWord(line string) string {
	line = strings.TrimSpace(line)
	if rest := assignmentRE.ReplaceAllString(line, ""); rest != "" {
		line = rest
	}
	w, _, _ := strings.Cut(line, " ")
	return w
}

// example is what a block asks to check: the synopses and the script.
type example struct {
	synopses []string
	script   []string
}

// commands returns the example in b, or ok false when b is not one.
func (b block) example() (ex example, ok bool) {
	switch b.lang {
	case "", "sh", "shell", "bash", "console":
	default:
		return example{}, false
	}
	var cmds []string
	prompted := slices.ContainsFunc(b.text, func(l string) bool { return strings.HasPrefix(l, "$ ") })
	for _, l := range b.text {
		if prompted {
			if c, ok := strings.CutPrefix(l, "$ "); ok {
				cmds = append(cmds, c)
			}
			continue
		}
		cmds = append(cmds, l)
	}
	if len(cmds) == 0 || !slices.Contains(exampleCommands, firstWord(cmds[0])) && !slices.Contains(exampleCommands, firstLiteral(cmds[0])) {
		return example{}, false
	}
	for _, c := range cmds {
		if isSynopsis(c) {
			ex.synopses = append(ex.synopses, c)
		} else {
			ex.script = append(ex.script, c)
		}
	}
	return ex, true
}

// firstLiteral is the line's first word as written, assignments included.
func firstLiteral(line string) string {
	w, _, _ := strings.Cut(strings.TrimSpace(line), " ")
	return w
}

var (
	quotedRE      = regexp.MustCompile(`'[^']*'|"[^"]*"`)
	placeholderRE = regexp.MustCompile(`\b[A-Z][A-Z_]{2,}\b`)
)

// isSynopsis reports a hold command line that describes a form rather than
// being one: it has [optional] parts or PLACEHOLDER words (outside quotes,
// comments and leading assignments).
func isSynopsis(line string) bool {
	line = assignmentRE.ReplaceAllString(strings.TrimSpace(line), "")
	if firstLiteral(line) != "hold" {
		return false
	}
	line, _, _ = strings.Cut(quotedRE.ReplaceAllString(line, "''"), " #")
	return strings.Contains(line, "[") || placeholderRE.MatchString(line)
}

// helpFlags caches the flags each `hold help CMD` lists (all of them:
// `hold CMD --help` may show only its first screen).
var helpFlags sync.Map

var helpFlagRE = regexp.MustCompile(`(?m)^  (?:(-\w), |    )(--[\w-]+)`)

// flagsOf returns the flags `hold help CMD` lists, short and long.
func flagsOf(cmd string) (map[string]bool, error) {
	if v, ok := helpFlags.Load(cmd); ok {
		return v.(map[string]bool), nil
	}
	out, err := exec.Command(filepath.Join(binDir, "hold"), "help", cmd).Output()
	if err != nil {
		return nil, fmt.Errorf("hold help %s: %v", cmd, err)
	}
	flags := map[string]bool{}
	for _, m := range helpFlagRE.FindAllStringSubmatch(string(out), -1) {
		if m[1] != "" {
			flags[m[1]] = true
		}
		flags[m[2]] = true
	}
	helpFlags.Store(cmd, flags)
	return flags, nil
}

var flagTokenRE = regexp.MustCompile(`^-{1,2}[a-zA-Z][\w-]*`)

// checkSynopsis checks that the command of a synopsis exists and lists
// every flag the synopsis names (before a "--" that starts a command).
func checkSynopsis(line string) error {
	words := strings.Fields(quotedRE.ReplaceAllString(assignmentRE.ReplaceAllString(strings.TrimSpace(line), ""), "''"))
	if len(words) < 2 {
		return fmt.Errorf("%q names no subcommand", line)
	}
	flags, err := flagsOf(words[1])
	if err != nil {
		return err
	}
	for _, w := range words[2:] {
		if w == "--" || w == "#" {
			break
		}
		tok := flagTokenRE.FindString(strings.TrimLeft(w, "[|"))
		if tok != "" && !flags[tok] {
			return fmt.Errorf("%q: hold help %s lists no %s", line, words[1], tok)
		}
	}
	return nil
}

// TestDocExamples runs every shell example of README.md and docs/*.md, and
// checks every synopsis, by the rules above.
func TestDocExamples(t *testing.T) {
	ran, skipped := 0, 0
	for _, path := range documents(t) {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		blocks, err := parse(rel, string(raw))
		if err != nil {
			t.Error(err)
			continue
		}
		for _, b := range blocks {
			ex, ok := b.example()
			if !ok {
				if b.markerLine != 0 {
					t.Errorf("%s:%d: a doctest marker precedes a block that is not a shell example", b.file, b.markerLine)
				}
				continue
			}
			name := fmt.Sprintf("%s:%d", b.file, b.line)
			for _, s := range ex.synopses {
				if err := checkSynopsis(s); err != nil {
					t.Errorf("%s: %v", name, err)
				}
			}
			if len(ex.script) == 0 {
				continue
			}
			if b.skip != "" {
				skipped++
				t.Logf("%s: not run: %s", name, b.skip)
				continue
			}
			ran++
			t.Run(name, func(t *testing.T) { runExample(t, b, ex.script) })
		}
	}
	t.Logf("%d examples ran, %d skipped by their marker", ran, skipped)
	if ran == 0 {
		t.Fatal("no examples found: the parser is broken")
	}
}

// runExample runs script (after b's setup) and fails unless it exits 0.
func runExample(t *testing.T, b block, script []string) {
	testenv.LookPath(t, "bash", "the examples are bash")
	for _, tool := range b.needs {
		if tool == pgServerTool {
			if pgServer == nil {
				testenv.MissingTool(t, "PostgreSQL", fmt.Sprintf("%s:%d needs a server (.ci/run installs postgresql)", b.file, b.line))
			}
			continue
		}
		testenv.LookPath(t, tool, fmt.Sprintf("%s:%d runs it (.ci/run installs it)", b.file, b.line))
	}
	tmp := t.TempDir()
	work, run := filepath.Join(tmp, "work"), filepath.Join(tmp, "run")
	for _, d := range []string{work, run} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	dir := work
	if b.dir != "" {
		dir = b.dir
	}
	text := "set -e -o pipefail\n" + strings.Join(b.setup, "\n") + "\n" + strings.Join(script, "\n") + "\n"
	ctx, cancel := context.WithTimeout(context.Background(), exampleLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", text)
	cmd.Dir = dir
	cmd.Env = exampleEnv(run)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s:%d: the example did not finish within %v:\n%s\n%s", b.file, b.line, exampleLimit, text, out.String())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s:%d: %v", b.file, b.line, err)
	}
	if err != nil {
		t.Errorf("%s:%d: the example fails (%v) as written:\n%s\noutput:\n%s", b.file, b.line, err, text, out.String())
	}
}

// exampleEnv is the environment of an example: the test's, with the hold
// just built first on PATH, named locks in run, and none of hold's own
// settings.
func exampleEnv(run string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "HOLD_") || k == "PATH" || k == "XDG_RUNTIME_DIR" {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"), "XDG_RUNTIME_DIR="+run, "HOLD_TEST_NAMED_DIR="+run, "TERM=dumb")
	if pgServer != nil {
		env = append(env, "PGHOST=127.0.0.1", "PGPORT="+strconv.Itoa(pgServer.Port), "PGUSER="+pgtest.User,
			"PGDATABASE=postgres", "PGSSLMODE=disable")
	}
	return env
}
