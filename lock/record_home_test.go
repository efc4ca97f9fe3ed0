package lock

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRecordKeysMatchOwnerTags: the codec's key table names exactly the
// keys encoding/json reads into Owner (DecodeOwner), and the encoder
// writes them in the table's order.
func TestRecordKeysMatchOwnerTags(t *testing.T) {
	var tags []string
	typ := reflect.TypeFor[Owner]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			t.Errorf("Owner.%s has no JSON name: the codec cannot write it", typ.Field(i).Name)
			continue
		}
		tags = append(tags, name)
	}
	keys := recordKeys[:]
	if a, b := slices.Sorted(slices.Values(tags)), slices.Sorted(slices.Values(keys)); !slices.Equal(a, b) {
		t.Fatalf("Owner's JSON names %q differ from the codec's key table %q", a, b)
	}
	// A record with every field set, read key by key.
	o := Owner{PID: 1, Host: "h", ID: "t", StartedAt: time.Unix(1, 0), ProcStart: 2, PIDNS: 3, BootID: "b",
		Command: []string{"c"}, Fence: 4, Shared: true, Released: true, Protocol: "p", Fields: map[string]string{"k": "v"}}
	dec := json.NewDecoder(strings.NewReader(string(o.Encode())))
	var order []string
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, k.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(order, keys) {
		t.Fatalf("the encoder writes the keys in the order %q, the table says %q", order, keys)
	}
	if !IsRecord(o.Encode()) {
		t.Fatalf("IsRecord refuses a record with every key: %s", o.Encode())
	}
}

// recordSpelling matches what only a reader or writer of the owner
// record's JSON would spell: the fence's or the released flag's quoted
// name, or any of the record's keys quoted and followed by a colon.
var recordSpelling = regexp.MustCompile(`"(` + nameFence + `|` + nameReleased + `)"|"(` +
	strings.Join(recordKeys[:], "|") + `)"\s*:`)

// windowsDevice matches the file names Windows takes for its devices.
var windowsDevice = regexp.MustCompile(`(?i)^(con|prn|aux|nul|com[0-9]|lpt[0-9])(\.|$)`)

// otherFormats are the files that write, by hand, a format other than the
// record's whose keys share its names, and why each may.
var otherFormats = map[string]string{
	"internal/agent/wirefast.go": "the agent's replies on its wire (docs/agent.md): a lock's token and protocol are fields of a reply there, written by hand on a lock's cycle and checked against encoding/json by its tests",
}

// TestRecordFormatHasOneHome: no Go file of the module outside the codec
// (the files record_*.go of this package) spells the record's format, so
// that no reader or writer can drift from it: every one calls the codec.
// Tests may spell records (they check the codec); Owner's struct tags are
// checked against the codec by TestRecordKeysMatchOwnerTags.
func TestRecordFormatHasOneHome(t *testing.T) {
	for _, bad := range []string{`{"fence":`, `,"released":true`, `"proc_start": 1`, `"token":`} {
		if !recordSpelling.MatchString(bad) {
			t.Fatalf("the pattern misses %q", bad)
		}
	}
	for _, fine := range []string{"fence", "released", `"shared" does not apply`, `json:"pid"`} {
		if recordSpelling.MatchString(fine) {
			t.Fatalf("the pattern matches %q", fine)
		}
	}
	root := ".."
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			name := d.Name()
			if strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (bench, examples)
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "lock/record_") || otherFormats[rel] != "" {
			return nil
		}
		if windowsDevice.MatchString(d.Name()) {
			// Windows opens the device, not the file, and a clone there
			// cannot hold it at all.
			t.Errorf("%s: a Windows device name; rename the file", rel)
			return nil
		}
		checked++
		for _, where := range recordSpellings(t, path, rel == "lock/owner.go") {
			t.Errorf("%s: spells the owner record's format; call the codec in package lock instead", where)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d files checked: the walk missed the module", checked)
	}
}

// recordSpellings returns where the Go file at path spells the record's
// format: in a string literal, or in a struct tag naming the fence or the
// released flag (a second type decoding records). Owner's own tags are
// allowed where ownerTags is set.
func recordSpellings(t *testing.T, path string, ownerTags bool) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	tags := map[*ast.BasicLit]bool{}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			if n.Tag == nil {
				return true
			}
			tags[n.Tag] = true
			tag, _ := strconv.Unquote(n.Tag.Value)
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("json"), ",")
			if !ownerTags && (name == nameFence || name == nameReleased) {
				found = append(found, fset.Position(n.Tag.Pos()).String()+" "+n.Tag.Value)
			}
		case *ast.BasicLit:
			if n.Kind != token.STRING || tags[n] {
				return true
			}
			s, err := strconv.Unquote(n.Value)
			if err == nil && recordSpelling.MatchString(s) {
				found = append(found, fset.Position(n.Pos()).String()+" "+n.Value)
			}
		}
		return true
	})
	return found
}
