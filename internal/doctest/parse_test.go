//go:build unix

package doctest

import (
	"strings"
	"testing"
)

// TestParseAndClassify: the rules that decide what runs, on a document
// with one of each kind of block.
func TestParseAndClassify(t *testing.T) {
	doc := strings.Join([]string{
		"# t",
		"",
		"    hold run T -- true          # a command",
		"    hold status [--json] TARGET...",
		"",
		"<!-- doctest: skip needs a server -->",
		"```sh",
		"hold run etcd://h:1/k -- true",
		"```",
		"",
		"```",
		"$ hold status T",
		"T.lock: free",
		"```",
		"",
		"    lock        expected      kept",
		"",
		"```go",
		"hold.Do(ctx, \"x\", fn)",
		"```",
		"",
		"<!-- doctest: setup touch f -->",
		"    HOLD_DEBUG=1 hold run f -- true",
	}, "\n")
	blocks, err := parse("t.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		line             int
		example          bool
		synopses, script int
		skip             string
		setup            int
	}
	wants := []want{
		{3, true, 1, 1, "", 0},
		{8, true, 0, 1, "needs a server", 0},
		{12, true, 0, 1, "", 0},
		{16, false, 0, 0, "", 0},
		{19, false, 0, 0, "", 0},
		{23, true, 0, 1, "", 1},
	}
	if len(blocks) != len(wants) {
		t.Fatalf("%d blocks, want %d: %+v", len(blocks), len(wants), blocks)
	}
	for i, w := range wants {
		b := blocks[i]
		ex, ok := b.example()
		if b.line != w.line || ok != w.example || len(ex.synopses) != w.synopses || len(ex.script) != w.script ||
			b.skip != w.skip || len(b.setup) != w.setup {
			t.Errorf("block %d: line %d, example %v, %d synopses, %d commands, skip %q, %d setup; want %+v",
				i, b.line, ok, len(ex.synopses), len(ex.script), b.skip, len(b.setup), w)
		}
	}

	for _, bad := range []string{
		"<!-- doctest: skip -->\n    hold version\n",          // no reason
		"<!-- doctest: skip why -->\n\nSome prose.\n",         // no block follows
		"<!-- doctest: dir elsewhere -->\n    hold version\n", // only repo
		"<!-- doctest skip: why -->\n    hold version\n",      // malformed
	} {
		if _, err := parse("bad.md", bad); err == nil {
			t.Errorf("parse accepted %q", bad)
		}
	}
}

// TestSynopsisFlagsChecked: a synopsis naming a flag its command does not
// list is an error, and so is an unknown command.
func TestSynopsisFlagsChecked(t *testing.T) {
	for line, ok := range map[string]bool{
		"hold status [--json] TARGET...":                               true,
		"hold run [flags] TARGET -- COMMAND [--bogus]":                 true, // after --: the command's
		"hold status [--fair] TARGET...":                               false,
		"hold update [--shared] FILE -- FILTER":                        false,
		"hold frobnicate [--json] TARGET":                              false,
		"hold break [--force] [--lock-file PATH | --name NAME] TARGET": true,
	} {
		if err := checkSynopsis(line); (err == nil) != ok {
			t.Errorf("checkSynopsis(%q) = %v", line, err)
		}
	}
}
