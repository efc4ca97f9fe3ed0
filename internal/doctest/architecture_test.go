package doctest

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The map of the code, docs/architecture.md, names a file for every rule.
// A file that moves without the page moving with it would make the map
// lie, so every repository path the page names must exist:
//
//   - a word in backquotes that contains a slash or ends in .go or .md
//     (`internal/proc/proc.go`, `deadlock.go`), relative to the module root;
//   - a word with a slash in the layers picture (internal/cli, js/),
//     relative to the module root;
//   - a Markdown link's target that is not a URL, relative to docs/.
//
// HTML comments are left out: they hold notes about paths that do not
// exist yet.

var (
	htmlCommentRE = regexp.MustCompile(`(?s)<!--.*?-->`)
	fenceRE       = regexp.MustCompile("(?s)\n```[^\n]*\n(.*?)\n```")
	backquoteRE   = regexp.MustCompile("`([^`\n]+)`")
	pictureWordRE = regexp.MustCompile(`\b[a-z][a-z0-9-]*(?:/[a-z0-9-]+)*/(?:[a-z0-9-]+\b)?`)
	linkRE        = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	pathWordRE    = regexp.MustCompile(`^[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*/?$`)
)

// architecturePaths returns the repository paths text names, each with
// the way it was named, relative to the module root.
func architecturePaths(text string) map[string]string {
	text = htmlCommentRE.ReplaceAllString(text, "")
	paths := map[string]string{}
	for _, m := range fenceRE.FindAllStringSubmatch(text, -1) {
		for _, w := range pictureWordRE.FindAllString(m[1], -1) {
			paths[strings.TrimSuffix(w, "/")] = "in the picture"
		}
	}
	prose := fenceRE.ReplaceAllString(text, "\n")
	for _, m := range backquoteRE.FindAllStringSubmatch(prose, -1) {
		w := m[1]
		if !pathWordRE.MatchString(w) || strings.HasPrefix(w, "-") {
			continue
		}
		if strings.Contains(w, "/") || strings.HasSuffix(w, ".go") || strings.HasSuffix(w, ".md") {
			paths[strings.TrimSuffix(w, "/")] = "`" + w + "`"
		}
	}
	for _, m := range linkRE.FindAllStringSubmatch(prose, -1) {
		target, _, _ := strings.Cut(m[1], "#")
		if target == "" || strings.Contains(target, "://") {
			continue
		}
		paths[filepath.ToSlash(filepath.Clean(filepath.Join("docs", target)))] = "a link to " + m[1]
	}
	return paths
}

// TestArchitecturePaths: every path docs/architecture.md names exists.
func TestArchitecturePaths(t *testing.T) {
	root, err := filepath.Abs("../..") // the module's root
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	paths := architecturePaths(string(raw))
	// The page names some forty files and packages; far fewer means the
	// extraction above broke, and the test would pass without checking.
	if len(paths) < 30 {
		t.Fatalf("found only %d paths in docs/architecture.md: %v", len(paths), paths)
	}
	for p, how := range paths {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); err != nil {
			t.Errorf("docs/architecture.md names %s (%s), which does not exist: move the page with the code", p, how)
		}
	}
}

// TestArchitecturePathsExtraction: what counts as a path, on a page with
// one of each kind of mention.
func TestArchitecturePathsExtraction(t *testing.T) {
	page := strings.Join([]string{
		"# t",
		"",
		"```",
		" front ends   internal/cli ── cmd/hold ◄── js/, python/",
		" library      hold (the root package)",
		"```",
		"",
		"| rule | home |",
		"| --- | --- |",
		"| liveness | `internal/proc/proc.go` |",
		"| deadlock | `deadlock.go` |",
		"| flags | `--name NAME`, `TARGET.lock`, `hold run T -- x`, `Lost()` |",
		"",
		"See [cli.md](cli.md#exit-status), [tcplock](../examples/tcplock), [Go](https://go.dev/x).",
		"<!-- moving: `lock/record_codec.go` -->",
	}, "\n")
	got := architecturePaths(page)
	want := []string{"internal/cli", "cmd/hold", "js", "python", "internal/proc/proc.go", "deadlock.go", "docs/cli.md", "examples/tcplock"}
	for _, w := range want {
		if _, ok := got[w]; !ok {
			t.Errorf("%s not found; got %v", w, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d paths, want %d: %v", len(got), len(want), got)
	}
}
