package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/hold-dev/hold/lock"
)

// A lock file that is the changed file itself guards nothing (an update
// replaces it; the owner record would land in the data): it is refused
// however it is spelled, and any other lock file is fine.
func TestCheckLockFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "data.json")
	writeFile(t, file, "{}", 0o644)
	other := filepath.Join(dir, "other.lock")
	writeFile(t, other, "", 0o644)
	refused := []string{file, filepath.Join(dir, ".", "data.json"), filepath.Join(dir, "sub", "..", "data.json")}
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, file); err == nil { // none across Windows drives
			refused = append(refused, rel)
		}
	}
	if runtime.GOOS != "windows" {
		link := filepath.Join(dir, "link")
		if err := os.Symlink(file, link); err != nil {
			t.Fatal(err)
		}
		hard := filepath.Join(dir, "hard")
		if err := os.Link(file, hard); err != nil {
			t.Fatal(err)
		}
		refused = append(refused, link, hard)
	}
	for _, lf := range refused {
		err := CheckLockFile("update", file, lf)
		var le *lock.Error
		if !errors.As(err, &le) || le.Op != "update" || le.Path != file || !errors.Is(err, lock.ErrLockIsTarget) {
			t.Errorf("lock file %s for %s: %v, want a *lock.Error matching ErrLockIsTarget", lf, file, err)
			continue
		}
		if !strings.Contains(le.Hint, file+".lock") {
			t.Errorf("the hint does not name the default lock file: %q", le.Hint)
		}
	}
	for _, lf := range []string{"", other, file + ".lock", filepath.Join(dir, "missing")} {
		if err := CheckLockFile("append", file, lf); err != nil {
			t.Errorf("lock file %q refused: %v", lf, err)
		}
	}
	// A file that does not exist yet is refused by its path alone.
	missing := filepath.Join(dir, "new.json")
	if err := CheckLockFile("append", missing, missing); !errors.Is(err, lock.ErrLockIsTarget) {
		t.Errorf("a missing file as its own lock file: %v", err)
	}
}
