//go:build unix

package dirlock

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// isStamp answers exactly what reading the whole record and comparing it
// with the stamp answers, for records equal to the stamp, shorter, longer,
// different, absent, and stamps past its stack buffer.
func TestIsStampAgreesWithReadRecord(t *testing.T) {
	stamp := []byte(`{"fence":0,"pid":1,"token":"abc"}`)
	big := bytes.Repeat([]byte("x"), 4000)
	cases := []struct {
		name   string
		record []byte // nil: no record file
		stamp  []byte
	}{
		{"equal", stamp, stamp},
		{"shorter", stamp[:len(stamp)-1], stamp},
		{"longer", append(append([]byte{}, stamp...), '\n'), stamp},
		{"different", bytes.ToUpper(stamp), stamp},
		{"empty", []byte{}, stamp},
		{"absent", nil, stamp},
		{"big equal", big, big},
		{"big longer", append(append([]byte{}, big...), 'x'), big},
	}
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), "x.lock")
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if c.record != nil {
			if err := os.WriteFile(filepath.Join(dir, OwnerFile), c.record, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		raw, rerr := readRecord(dir)
		want := rerr == nil && raw != nil && bytes.Equal(raw, c.stamp)
		got, err := isStamp(dir, c.stamp)
		if err != nil || got != want {
			t.Errorf("%s: isStamp = %v, %v; reading the record says %v", c.name, got, err, want)
		}
	}
	// No directory at all (ENOTDIR through a file): absent, not an error.
	file := filepath.Join(t.TempDir(), "plain")
	os.WriteFile(file, nil, 0o644)
	if got, err := isStamp(file, stamp); got || err != nil {
		t.Errorf("record under a plain file: %v, %v; want false, nil", got, err)
	}
}
