//go:build unix

package testenv

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Someone and SomeGroup own files and links in tests of what an update
// keeps and which links it follows: a user and group other than the one
// running the test (and other than Nobody).
const Someone, SomeGroup = 4242, 4343

// Lchown gives path (the link itself, if it is one) to uid and gid, or
// fails the test.
func Lchown(t testing.TB, path string, uid, gid int) {
	t.Helper()
	if err := os.Lchown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
}

// StickyDir makes a sticky world-writable directory like /tmp in dir and
// returns its path.
func StickyDir(t testing.TB, dir string) string {
	t.Helper()
	d := filepath.Join(dir, "tmp")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return d
}
