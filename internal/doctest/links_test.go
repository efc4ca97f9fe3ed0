package doctest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// The documentation moves between pages (the CLI reference left the README
// for docs/cli.md), and a link to a section that moved still renders: it
// just leads nowhere. So every relative link of the pages below must name
// a file that exists and, for a link into a Markdown page, a heading that
// page has, by GitHub's rule for a heading's anchor.

// linkedPages are the pages whose links are checked, relative to the
// module root.
func linkedPages(t *testing.T, root string) []string {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages := []string{"README.md", "js/README.md", "python/README.md"}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		pages = append(pages, filepath.ToSlash(rel))
	}
	return pages
}

var (
	fencedRE   = regexp.MustCompile("(?ms)^ *```.*?^ *```")
	codeSpanRE = regexp.MustCompile("`[^`\n]*`")
	headingRE  = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#* *$`)
)

// prose is text without its fenced blocks and code spans, where
// brackets and "#" are not Markdown.
func prose(text string) string {
	return codeSpanRE.ReplaceAllString(fencedRE.ReplaceAllString(text, ""), "``")
}

// anchors returns the anchors GitHub gives the headings of text: the
// heading in lower case, without punctuation, spaces made hyphens, and
// "-1", "-2", ... after the second and later uses of one anchor.
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(fencedRE.ReplaceAllString(text, ""), -1) {
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n, dup := seen[a]; dup {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n+1)
		} else {
			seen[a] = 0
		}
		out[a] = true
	}
	return out
}

// TestDocLinks: every relative link of the documentation leads to a file
// that exists, and to a heading of it.
func TestDocLinks(t *testing.T) {
	root, err := filepath.Abs("../..") // the module's root
	if err != nil {
		t.Fatal(err)
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	checked := 0
	for _, page := range linkedPages(t, root) {
		text := read(page)
		for _, m := range linkRE.FindAllStringSubmatch(prose(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.ToSlash(filepath.Join(filepath.Dir(page), file))
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
					t.Errorf("%s links to %s, which does not exist", page, target)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(dest, ".md") && !anchors(read(dest))[anchor] {
				t.Errorf("%s links to %s, but %s has no heading with that anchor", page, target, dest)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d links: the parser is broken", checked)
	}
}

// TestAnchors: GitHub's anchors for the kinds of heading these pages have.
func TestAnchors(t *testing.T) {
	text := strings.Join([]string{
		"# The `hold` command",
		"## Compatibility with flock(1)",
		"## Lock lifetime: when hold or the command dies",
		"## hold append, hold update",
		"```",
		"# not a heading",
		"```",
		"### Cost",
		"### Cost",
	}, "\n")
	got := anchors(text)
	for _, want := range []string{"the-hold-command", "compatibility-with-flock1", "lock-lifetime-when-hold-or-the-command-dies",
		"hold-append-hold-update", "cost", "cost-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a line in a code block was taken for a heading")
	}
}
