package doctor

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/hold-dev/hold/internal/fsinfo"
)

// TestFilesystemMirrorsFsinfo checks that the report's Filesystem shows
// every field the identification finds, with the same JSON (what `hold
// doctor --json` printed when the report held fsinfo's type itself), and
// the same words in messages.
func TestFilesystemMirrorsFsinfo(t *testing.T) {
	pub, internal := reflect.TypeFor[Filesystem](), reflect.TypeFor[fsinfo.Filesystem]()
	for i := range internal.NumField() {
		f := internal.Field(i)
		if f.Tag.Get("json") == "-" {
			continue // what only the verdict uses (Class)
		}
		g, ok := pub.FieldByName(f.Name)
		if !ok || g.Tag != f.Tag {
			t.Errorf("doctor.Filesystem lacks fsinfo's field %s %s (or its tag)", f.Name, f.Tag)
		}
	}
	mirror := fsinfo.Describe("fuse", "/srv/base", "rw")
	m := fsinfo.Describe("ext4", "/dev/sda1", "rw")
	mirror.Mirror = &m
	for _, fs := range []fsinfo.Filesystem{
		fsinfo.Describe("nfs4", "srv:/x", "rw,local_lock=flock,nolock"),
		fsinfo.Describe("fuse.sshfs", "h:/x", ""),
		mirror,
		{},
	} {
		want, err := json.Marshal(fs)
		if err != nil {
			t.Fatal(err)
		}
		p := publicFilesystem(fs)
		got, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("JSON %s, want %s", got, want)
		}
		if p.String() != fs.String() {
			t.Errorf("String %q, want %q", p.String(), fs.String())
		}
	}
}
