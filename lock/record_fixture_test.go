package lock

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// testdata/records.json holds owner records exactly as hold writes them,
// for the clients of `hold agent` to check their types against: the Node
// package's Owner (js/test/owner-type.test.js) and the Python package's
// (python/tests/test_owner_type.py). This test keeps the fixture true to
// the Go codec, so that a key added to Owner and not to the fixture, or a
// change of the encoding, fails here first, and then in the clients' tests
// once the fixture has it.

// recordFixture is the layout of testdata/records.json.
type recordFixture struct {
	About string `json:"about"`
	// Records: each exactly the bytes Owner.Encode writes, without its
	// newline.
	Records []json.RawMessage `json:"records"`
	// Past: what a lock file keeps once its holder has let go.
	Past json.RawMessage `json:"past"`
}

func readRecordFixture(t *testing.T) recordFixture {
	t.Helper()
	b, err := os.ReadFile("testdata/records.json")
	if err != nil {
		t.Fatal(err)
	}
	var f recordFixture
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("testdata/records.json: %v", err)
	}
	if len(f.Records) == 0 || len(f.Past) == 0 {
		t.Fatal("testdata/records.json has no records, or no past record")
	}
	return f
}

// decodeStrict decodes a record into an Owner, refusing keys Owner lacks.
func decodeStrict(t *testing.T, raw []byte) Owner {
	t.Helper()
	var o Owner
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		t.Fatalf("record %s: %v", raw, err)
	}
	return o
}

// ownerKeys are the JSON keys of Owner's fields, from their tags.
func ownerKeys() []string {
	var keys []string
	typ := reflect.TypeOf(Owner{})
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			keys = append(keys, name)
		}
	}
	return keys
}

// TestRecordFixtureIsEncoded: every record of the fixture is exactly what
// Owner.Encode writes for the values it decodes to.
func TestRecordFixtureIsEncoded(t *testing.T) {
	for _, raw := range readRecordFixture(t).Records {
		o := decodeStrict(t, raw)
		got := bytes.TrimSuffix(o.Encode(), []byte("\n"))
		if !bytes.Equal(got, raw) {
			t.Errorf("testdata/records.json has\n\t%s\nwhere Owner.Encode writes\n\t%s", raw, got)
		}
	}
}

// TestRecordFixtureHasEveryKey: every JSON key of Owner appears in some
// record of the fixture, so that the clients' tests check their types for
// all of them.
func TestRecordFixtureHasEveryKey(t *testing.T) {
	seen := map[string]bool{}
	for _, raw := range readRecordFixture(t).Records {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		for k := range m {
			seen[k] = true
		}
	}
	for _, k := range ownerKeys() {
		if !seen[k] {
			t.Errorf("no record of testdata/records.json has the key %q of Owner: add one that does", k)
		}
	}
}

// TestRecordFixturePast: the past record decodes as a released record
// with its fencing token, and has no key that Owner lacks.
func TestRecordFixturePast(t *testing.T) {
	o := decodeStrict(t, readRecordFixture(t).Past)
	if !o.Released || o.Fence == 0 {
		t.Errorf("past record decodes to %+v, want released with a fence", o)
	}
}
