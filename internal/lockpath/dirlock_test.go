package lockpath

import (
	"os"
	"path/filepath"
	"testing"
)

// TestIsDirLock: a directory at a lock path is a portable lock, a file or
// nothing is not, and a symbolic link is not followed; IsDirLockType,
// given what an lstat or a directory listing found, says the same.
func TestIsDirLock(t *testing.T) {
	dir := t.TempDir()
	d, f := filepath.Join(dir, "d.lock"), filepath.Join(dir, "f.lock")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{d: true, f: false, filepath.Join(dir, "none.lock"): false}
	if l := filepath.Join(dir, "link.lock"); os.Symlink(d, l) == nil {
		want[l] = false
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, e := range entries {
		listed[filepath.Join(dir, e.Name())] = IsDirLockType(e.Type())
	}
	for path, w := range want {
		if got := IsDirLock(path); got != w {
			t.Errorf("IsDirLock(%s) = %v, want %v", filepath.Base(path), got, w)
		}
		if got, ok := listed[path]; ok && got != w {
			t.Errorf("IsDirLockType of %s's entry = %v, want %v", filepath.Base(path), got, w)
		}
	}
}
