package atomicfile

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"
)

// syncFS serves the directory that cannot be opened: it needs only the
// file, even one this process may write but not read.
func TestSyncFS(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	writeFile(t, path, "x", 0o200)
	if err := syncFS(path); err != nil {
		t.Errorf("syncFS of a write-only file: %v", err)
	}
	if err := syncFS(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("syncFS of a missing file: %v", err)
	}
}
