package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Tests of Append, AppendTo and AppendFrom: one write at the end, synced;
// a failure cuts the file back to its size before, so no partial record
// stays.

func TestAppendCreatesAndAppends(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "log")
	fsys := &faultFS{}
	if err := AppendTo(fsys, path, false, []byte("one\n"), nil); err != nil {
		t.Fatal(err)
	}
	// A new name in the directory is made durable; an append to a file
	// that exists changes no name.
	if fsys.syncDirs != 1 {
		t.Errorf("creating the file synced its directory %d times, want 1", fsys.syncDirs)
	}
	if err := AppendTo(fsys, path, true, []byte("two\n"), nil); err != nil {
		t.Fatal(err)
	}
	if fsys.syncDirs != 1 {
		t.Errorf("appending to the file synced its directory again")
	}
	if fsys.writables != 0 {
		t.Errorf("an append asked the kernel %d times whether it may write before opening", fsys.writables)
	}
	if s := readFile(t, path); s != "one\ntwo\n" {
		t.Errorf("content %q", s)
	}
}

// Nothing to append writes nothing, creates nothing, and checks no lock.
func TestAppendNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	noCheck := func() error { t.Error("check called for an empty append"); return nil }
	if err := AppendTo(OS{}, path, false, nil, noCheck); err != nil {
		t.Fatal(err)
	}
	if err := AppendFrom(OS{}, path, false, strings.NewReader(""), noCheck); err != nil {
		t.Fatal(err)
	}
	notExist(t, path)
}

// MustExist refuses a missing file, creating nothing; check's error (a
// lost lock) writes nothing.
func TestAppendRefusals(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "absent")
	if err := AppendTo(OS{}, missing, true, []byte("x"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("AppendTo with mustExist of a missing file: %v", err)
	}
	if err := AppendFrom(OS{}, missing, true, strings.NewReader("x"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("AppendFrom with mustExist of a missing file: %v", err)
	}
	notExist(t, missing)

	path := filepath.Join(dir, "log")
	writeFile(t, path, "first\n", 0o644)
	before := snap(t, path)
	lost := errors.New("lock lost")
	if err := AppendTo(OS{}, path, true, []byte("x"), func() error { return lost }); err != lost {
		t.Errorf("AppendTo with a failing check: %v", err)
	}
	if err := AppendFrom(OS{}, path, true, strings.NewReader("x"), func() error { return lost }); err != lost {
		t.Errorf("AppendFrom with a failing check: %v", err)
	}
	before.unchanged(t)

	for name, p := range map[string]string{"a directory": dir, "a read-only file": filepath.Join(dir, "ro")} {
		writeFile(t, filepath.Join(dir, "ro"), "keep\n", 0o444)
		if err := AppendTo(OS{}, p, false, []byte("x"), nil); err == nil {
			t.Errorf("append to %s accepted", name)
		}
	}
	if s := readFile(t, filepath.Join(dir, "ro")); s != "keep\n" {
		t.Errorf("read-only file changed: %q", s)
	}
}

// A failed or short write, or a failed fsync, leaves no partial record.
func TestAppendFailureTruncatesBack(t *testing.T) {
	cases := []struct {
		name string
		fs   *faultFS
		want error
	}{
		{"disk full mid-write", &faultFS{writeErr: syscall.ENOSPC}, syscall.ENOSPC},
		{"fsync fails", &faultFS{syncErr: syscall.EIO}, syscall.EIO},
		{"read-only file system", &faultFS{createErr: syscall.EROFS}, syscall.EROFS},
		{"close fails", &faultFS{closeErr: syscall.EIO}, syscall.EIO},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log")
			writeFile(t, path, "first record\n", 0o644)
			err := AppendTo(c.fs, path, true, []byte(strings.Repeat("second record\n", 1000)), nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("AppendTo returned %v, want %v", err, c.want)
			}
			if c.fs.closeErr != nil {
				return // the record is complete and synced; only the close failed
			}
			if s := readFile(t, path); s != "first record\n" {
				t.Errorf("after the failure the file is %d bytes, want the 13 before", len(s))
			}
		})
	}
}

// A truncation that fails too is reported with the error that caused it.
func TestAppendTruncateFailureReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	writeFile(t, path, "first record\n", 0o644)
	err := AppendTo(&faultFS{writeErr: syscall.ENOSPC, truncateErr: syscall.EIO}, path, true, []byte("second record\n"), nil)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "truncating back to 13 bytes failed") || !strings.Contains(err.Error(), "input/output error") {
		t.Errorf("a write and a truncation that both failed: %v", err)
	}
}

// failingReader yields n bytes of x, then err.
type failingReader struct {
	n   int
	err error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, r.err
	}
	k := min(len(p), r.n)
	for i := range p[:k] {
		p[i] = 'x'
	}
	r.n -= k
	return k, nil
}

// AppendFrom (what `hold append -` uses for a large stdin) copies any
// amount in pieces; a failure after some pieces went out, of the input or
// of the file, cuts the file back to its size before, as a failed Append
// does.
func TestAppendFromStreamsAndTruncatesBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	writeFile(t, path, "first record\n", 0o644)
	const size = 3*appendChunk + 12345 // several pieces, the last one short
	if err := AppendFrom(OS{}, path, true, &failingReader{n: size, err: io.EOF}, nil); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Size() != 13+size {
		t.Fatalf("size %d after appending %d bytes to 13", fi.Size(), size)
	}
	err := AppendFrom(OS{}, path, true, &failingReader{n: 2*appendChunk + 1, err: syscall.EIO}, nil)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("a failing input gave %v, want EIO", err)
	}
	if fi, _ := os.Stat(path); fi.Size() != 13+size {
		t.Errorf("after a failed streamed append the file is %d bytes, want %d", fi.Size(), 13+size)
	}
	err = AppendFrom(&faultFS{syncErr: syscall.EIO}, path, true, &failingReader{n: appendChunk + 1, err: io.EOF}, nil)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("a failing sync gave %v, want EIO", err)
	}
	if fi, _ := os.Stat(path); fi.Size() != 13+size {
		t.Errorf("after a failed sync the file is %d bytes, want %d", fi.Size(), 13+size)
	}
	// Input that fails before its first piece appends nothing.
	if err := AppendFrom(OS{}, path, true, &failingReader{err: syscall.EIO}, nil); !errors.Is(err, syscall.EIO) {
		t.Errorf("input failing at once gave %v", err)
	}
}
