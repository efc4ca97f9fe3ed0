package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hold-dev/hold/lock"
)

// Tests of Resolve and Locate: which files an update or an append may
// change at all, decided before anything is read or written.

func TestResolveFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	writeFile(t, path, "x", 0o644)
	tg, err := Resolve(OS{}, path)
	if err != nil {
		t.Fatal(err)
	}
	if tg.Path != path || tg.Info == nil || tg.Info.Size() != 1 {
		t.Errorf("Resolve = %+v, want the file and its stat", tg)
	}

	missing := filepath.Join(dir, "missing")
	tg, err = Resolve(OS{}, missing)
	if err != nil || tg.Path != missing || tg.Info != nil {
		t.Errorf("Resolve of a missing file = %+v, %v; want its path and no stat", tg, err)
	}
}

func TestResolveRefusals(t *testing.T) {
	dir := t.TempDir()
	ro := filepath.Join(dir, "ro")
	writeFile(t, ro, "keep", 0o444)
	cases := []struct {
		name string
		path string
		want error
	}{
		{"a directory", dir, syscall.EISDIR},
		{"a read-only file", ro, ErrReadOnly},
		{"a NUL byte", filepath.Join(dir, "a\x00b"), lock.ErrInvalidName},
	}
	for _, c := range cases {
		for _, op := range []struct {
			name string
			f    func(FS, string) (*Target, error)
		}{{"Resolve", Resolve}, {"Locate", Locate}} {
			tg, err := op.f(OS{}, c.path)
			if !errors.Is(err, c.want) || tg != nil {
				t.Errorf("%s of %s: %+v, %v; want %v", op.name, c.name, tg, err, c.want)
			}
		}
	}
	// A read-only file is refused for permission, so that callers that
	// only ask "was I allowed?" see it too.
	_, err := Resolve(OS{}, ro)
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrPermission) || !errors.As(err, &pe) || pe.Path != ro {
		t.Errorf("read-only file: %v, want a permission error naming it", err)
	}
	if Hint(err) == "" {
		t.Errorf("no hint for %v", err)
	}
}

// Resolve asks the kernel whether the file may be written (a rename over
// it would succeed where a write would not); Locate, for callers whose
// next step asks the same, does not.
func TestResolveAsksWritable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "x", 0o644)
	fsys := &faultFS{writableErr: syscall.EACCES}
	if _, err := Resolve(fsys, path); !errors.Is(err, syscall.EACCES) || fsys.writables != 1 {
		t.Errorf("Resolve: %v after %d access checks, want EACCES after one", err, fsys.writables)
	}
	fsys = &faultFS{writableErr: syscall.EACCES}
	if _, err := Locate(fsys, path); err != nil || fsys.writables != 0 {
		t.Errorf("Locate: %v after %d access checks, want none", err, fsys.writables)
	}
	// Nor does either ask about a file that does not exist yet.
	fsys = &faultFS{writableErr: syscall.EACCES}
	if _, err := Resolve(fsys, path+".new"); err != nil || fsys.writables != 0 {
		t.Errorf("Resolve of a new file: %v after %d access checks", err, fsys.writables)
	}
	// An update refuses the file before fn runs.
	before := snap(t, path)
	err := UpdateWith(&faultFS{writableErr: syscall.EACCES}, path, Options{}, func([]byte) ([]byte, error) {
		t.Error("fn called for a file that may not be written")
		return []byte("y"), nil
	}, nil)
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("UpdateWith: %v, want a permission error", err)
	}
	before.unchanged(t)
}

// Open's Target carries the open file's stat, so that the checks and the
// metadata copied concern the file that is read; a missing file opens as
// none, or as an error with MustExist.
func TestOpenStatsOpenedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "x", 0o644)
	tg, f, err := Open(OS{}, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	if !os.SameFile(tg.Info, fi) {
		t.Error("the Target's stat is not the open file's")
	}
	missing := filepath.Join(filepath.Dir(path), "missing")
	tg, f, err = Open(OS{}, missing, Options{})
	if err != nil || f != nil || tg.Info != nil {
		t.Errorf("Open of a missing file: %v, %v, %v; want no file and no error", tg, f, err)
	}
	if _, _, err := Open(OS{}, missing, Options{MustExist: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open with MustExist of a missing file: %v", err)
	}
}
