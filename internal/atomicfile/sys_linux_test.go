package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// syncFS serves the directory that cannot be opened: it needs only the
// file, even one this process may write but not read (run as another
// user when the tests run as root, who may read anything).
func TestSyncFS(t *testing.T) {
	base, run := asNobody(t)
	dir := filepath.Join(base, "d")
	os.Mkdir(dir, 0o755)
	path := filepath.Join(dir, "f")
	writeFile(t, path, "x", 0o200)
	chownToWorker(t, path)
	if code, out := run("syncfs", path); code != 1 {
		t.Errorf("syncFS of a write-only file: worker exit %d, want 1 (done); output: %s", code, out)
	}
	if err := syncFS(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("syncFS of a missing file: %v", err)
	}
}
