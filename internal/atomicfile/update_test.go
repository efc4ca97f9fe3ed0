package atomicfile

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// Tests of UpdateWith and UpdateStream: what a read-modify-write
// publishes, and that every failure before the rename leaves the file as
// it was, with no temp file beside it.

func TestUpdateReplacesContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	writeFile(t, path, `{"n":1}`, 0o640)
	before := snap(t, path)
	fsys := &faultFS{}
	var got []byte
	err := UpdateWith(fsys, path, Options{}, func(old []byte) ([]byte, error) {
		got = append([]byte(nil), old...)
		return []byte(`{"n":2}`), nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"n":1}` {
		t.Errorf("fn got %q, want the old content", got)
	}
	if s := readFile(t, path); s != `{"n":2}` {
		t.Errorf("content %q", s)
	}
	// (On Windows os.SameFile looks both paths up when asked, so it cannot
	// compare a stat from before the rename, and the mode is all 0666.)
	after, _ := os.Stat(path)
	if runtime.GOOS != "windows" && os.SameFile(before.info, after) {
		t.Error("the file was written in place, not replaced by a new one")
	}
	if runtime.GOOS != "windows" && after.Mode() != before.info.Mode() {
		t.Errorf("mode %v, want the original %v", after.Mode(), before.info.Mode())
	}
	if len(fsys.renamed) != 1 || fsys.renamed[0][1] != path || filepath.Dir(fsys.renamed[0][0]) != filepath.Dir(path) {
		t.Errorf("renames %v, want one, from a temp file beside the file", fsys.renamed)
	}
	if tmp := tempFiles(t, path); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}
}

func TestUpdateFnErrorWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "original", 0o644)
	before := snap(t, path)
	boom := errors.New("boom")
	err := UpdateWith(OS{}, path, Options{}, func([]byte) ([]byte, error) { return []byte("x"), boom },
		func() error { t.Error("check called after fn failed"); return nil })
	if err != boom {
		t.Fatalf("UpdateWith returned %v, want fn's error as it is", err)
	}
	before.unchanged(t)
}

// Content equal to the old publishes nothing: no new inode, no rename,
// and no check (which only guards a publish).
func TestUpdateUnchangedWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "same", 0o644)
	before := snap(t, path)
	fsys := &faultFS{}
	err := UpdateWith(fsys, path, Options{}, func(old []byte) ([]byte, error) { return append([]byte(nil), old...), nil },
		func() error { t.Error("check called for unchanged content"); return nil })
	if err != nil {
		t.Fatal(err)
	}
	before.unchanged(t)
	if len(fsys.renamed) > 0 {
		t.Errorf("unchanged content was renamed into place: %v", fsys.renamed)
	}
}

func TestUpdateMissingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new")
	got := []byte("sentinel")
	if err := UpdateWith(OS{}, path, Options{}, func(old []byte) ([]byte, error) {
		got = old
		return []byte("created\n"), nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("a missing file read as %q, want empty", got)
	}
	if s := readFile(t, path); s != "created\n" {
		t.Errorf("content %q", s)
	}

	// MustExist: an error matching fs.ErrNotExist, no fn, no file.
	strict := filepath.Join(dir, "strict")
	err := Update(OS{}, strict, true, func([]byte) ([]byte, error) {
		t.Error("fn called for a missing file under MustExist")
		return []byte("x"), nil
	}, nil)
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != strict {
		t.Errorf("MustExist on a missing file: %v, want a not-exist error naming it", err)
	}
	notExist(t, strict)
	if tmp := tempFiles(t, strict); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}
}

// Empty new content is refused (a producer that failed silently would
// wipe the file), the file left as it was; a missing file is not created
// by it, with or without AllowEmpty.
func TestUpdateRefusesEmptyContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	writeFile(t, path, "keep", 0o644)
	before := snap(t, path)
	for _, empty := range [][]byte{nil, {}} {
		err := UpdateWith(OS{}, path, Options{}, func([]byte) ([]byte, error) { return empty, nil },
			func() error { t.Error("check called for refused content"); return nil })
		var ee *EmptyError
		if !errors.As(err, &ee) || ee.Missing || ee.Path != path || !errors.Is(err, ErrEmpty) {
			t.Fatalf("empty content: %v, want an *EmptyError of an existing file", err)
		}
		if errors.Is(err, fs.ErrPermission) {
			t.Errorf("ErrEmpty matches fs.ErrPermission: %v", err)
		}
		before.unchanged(t)
	}
	if err := UpdateWith(OS{}, path, Options{AllowEmpty: true}, setTo(""), nil); err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, path); s != "" {
		t.Errorf("AllowEmpty: the file holds %q", s)
	}

	missing := filepath.Join(dir, "new.json")
	err := UpdateWith(OS{}, missing, Options{}, setTo(""), nil)
	var ee *EmptyError
	if !errors.As(err, &ee) || !ee.Missing || !strings.Contains(err.Error(), "nothing was created") {
		t.Errorf("empty content for a missing file: %v, want an *EmptyError saying nothing was created", err)
	}
	if err := UpdateWith(OS{}, missing, Options{AllowEmpty: true}, setTo(""), nil); err != nil {
		t.Fatal(err)
	}
	notExist(t, missing)
}

// check is the last step before the rename: it sees the new content
// complete in its temp file, and its error publishes nothing.
func TestUpdateCheckGuardsRename(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "original", 0o644)
	before := snap(t, path)
	lost := errors.New("lock lost")
	calls := 0
	err := UpdateWith(OS{}, path, Options{}, setTo("new content"), func() error {
		calls++
		tmp := tempFiles(t, path)
		if len(tmp) != 1 {
			t.Errorf("at check, temp files %v, want the one written", tmp)
		} else if s := readFile(t, tmp[0]); s != "new content" {
			t.Errorf("at check, the temp file holds %q, want all of the new content", s)
		}
		if s := readFile(t, path); s != "original" {
			t.Errorf("at check, the file already holds %q", s)
		}
		return lost
	})
	if !errors.Is(err, lost) || calls != 1 {
		t.Fatalf("UpdateWith returned %v after %d checks, want check's error after one", err, calls)
	}
	before.unchanged(t)

	calls = 0
	if err := UpdateWith(OS{}, path, Options{}, setTo("new content"), func() error { calls++; return nil }); err != nil || calls != 1 {
		t.Fatalf("with a passing check: %v after %d checks", err, calls)
	}
	if s := readFile(t, path); s != "new content" {
		t.Errorf("content %q", s)
	}
}

// Every step before the rename can fail; none of them may leave the file
// changed or a temp file beside it, for a file that exists and for one
// that does not.
func TestUpdateFailuresLeaveNothing(t *testing.T) {
	cases := []struct {
		name string
		fs   *faultFS
		want error
	}{
		{"read-only file system", &faultFS{createErr: syscall.EROFS}, syscall.EROFS},
		{"disk full on write", &faultFS{writeErr: syscall.ENOSPC}, syscall.ENOSPC},
		{"fsync fails", &faultFS{syncErr: syscall.EIO}, syscall.EIO},
		{"close fails", &faultFS{closeErr: syscall.EIO}, syscall.EIO},
		{"chmod fails", &faultFS{chmodErr: syscall.EPERM}, syscall.EPERM},
		{"rename fails", &faultFS{renameErr: syscall.EXDEV}, syscall.EXDEV},
	}
	content := strings.Repeat("new ", 10000)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			writeFile(t, path, "original", 0o644)
			before := snap(t, path)
			err := UpdateWith(c.fs, path, Options{}, setTo(content), nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("UpdateWith returned %v, want %v", err, c.want)
			}
			before.unchanged(t)

			if c.fs.chmodErr != nil {
				return // a new file has no mode to keep
			}
			missing := filepath.Join(dir, "new")
			if err := UpdateWith(c.fs, missing, Options{}, setTo(content), nil); !errors.Is(err, c.want) {
				t.Fatalf("UpdateWith of a new file returned %v, want %v", err, c.want)
			}
			notExist(t, missing)
			if tmp := tempFiles(t, missing); len(tmp) > 0 {
				t.Errorf("temp files left: %v", tmp)
			}
		})
	}
}

// Once the rename is done the update is done: a directory sync that fails
// then is a warning (*NotDurableError), never an error a caller would
// retry, applying the update twice.
func TestUpdateDirSyncFailureIsWarning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "original\n", 0o644)
	var warned []error
	o := Options{Warn: func(err error) { warned = append(warned, err) }}
	if err := UpdateWith(&faultFS{syncDirErr: syscall.EIO}, path, o, setTo("new\n"), nil); err != nil {
		t.Fatalf("an update whose rename succeeded returned %v", err)
	}
	if s := readFile(t, path); s != "new\n" {
		t.Errorf("content %q", s)
	}
	var nd *NotDurableError
	if len(warned) != 1 || !errors.As(warned[0], &nd) || nd.Path != path || !errors.Is(nd, syscall.EIO) {
		t.Fatalf("warnings %v, want one *NotDurableError of %s wrapping EIO", warned, path)
	}
	if !strings.Contains(nd.Error(), "may not survive a crash") {
		t.Errorf("unclear warning: %v", nd)
	}
	// No Warn: the warning is dropped, the update still done.
	if err := UpdateWith(&faultFS{syncDirErr: syscall.EIO}, path, Options{}, setTo("newer\n"), nil); err != nil {
		t.Fatal(err)
	}
}

// A successful update makes its rename durable: the directory is synced,
// or, when it may not be opened (EACCES), the whole file system instead,
// which is then no warning.
func TestUpdateSyncsDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "original\n", 0o644)
	fsys := &faultFS{}
	if err := UpdateWith(fsys, path, Options{}, setTo("one\n"), nil); err != nil {
		t.Fatal(err)
	}
	if fsys.syncDirs != 1 || fsys.syncFSs != 0 {
		t.Errorf("directory synced %d times, file system %d times; want 1 and 0", fsys.syncDirs, fsys.syncFSs)
	}

	var warned []error
	o := Options{Warn: func(err error) { warned = append(warned, err) }}
	fsys = &faultFS{syncDirErr: syscall.EACCES}
	if err := UpdateWith(fsys, path, o, setTo("two\n"), nil); err != nil {
		t.Fatal(err)
	}
	if fsys.syncFSs != 1 || len(warned) != 0 {
		t.Errorf("an unreadable directory: file system synced %d times, warnings %v; want one sync and no warning", fsys.syncFSs, warned)
	}

	fsys = &faultFS{syncDirErr: syscall.EACCES, syncFSErr: syscall.EIO}
	if err := UpdateWith(fsys, path, o, setTo("three\n"), nil); err != nil {
		t.Fatal(err)
	}
	var nd *NotDurableError
	if len(warned) != 1 || !errors.As(warned[0], &nd) || !errors.Is(nd, syscall.EACCES) {
		t.Errorf("neither could be synced: warnings %v, want a *NotDurableError with the directory's error", warned)
	}
	if s := readFile(t, path); s != "three\n" {
		t.Errorf("content %q", s)
	}
}

// A successful update removes the temp files a killed writer left.
func TestUpdateCleansStaleTemps(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	writeFile(t, path, "original\n", 0o644)
	stale := filepath.Join(dir, tempName(t, path, deadPID(t)))
	writeFile(t, stale, "half", 0o600)
	if err := UpdateWith(OS{}, path, Options{}, setTo("new\n"), nil); err != nil {
		t.Fatal(err)
	}
	notExist(t, stale)

	writeFile(t, stale, "half", 0o600)
	err := UpdateStream(OS{}, path, Options{}, func(_ io.Reader, out io.Writer) error {
		_, err := io.WriteString(out, "newer\n")
		return err
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	notExist(t, stale)
}

func TestUpdateStreamReplacesContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "one\ntwo\n", 0o640)
	before := snap(t, path)
	err := UpdateStream(OS{}, path, Options{}, func(old io.Reader, out io.Writer) error {
		if _, ok := old.(*os.File); !ok {
			t.Errorf("old is a %T, want the file itself (a child's stdin)", old)
		}
		if _, ok := out.(File); ok {
			t.Errorf("out is a %T, a file a child could keep writing to after the publish", out)
		}
		b, err := io.ReadAll(old)
		if err != nil {
			return err
		}
		_, err = out.Write(bytes.ToUpper(b))
		return err
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, path); s != "ONE\nTWO\n" {
		t.Errorf("content %q", s)
	}
	after, _ := os.Stat(path)
	if runtime.GOOS != "windows" && (os.SameFile(before.info, after) || after.Mode() != before.info.Mode()) {
		t.Errorf("not a replacement with the old mode: same file %v, mode %v", os.SameFile(before.info, after), after.Mode())
	}
	if tmp := tempFiles(t, path); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}

	// A missing file reads as empty and is created.
	missing := filepath.Join(filepath.Dir(path), "new")
	err = UpdateStream(OS{}, missing, Options{}, func(old io.Reader, out io.Writer) error {
		if b, _ := io.ReadAll(old); len(b) != 0 {
			t.Errorf("a missing file read as %q", b)
		}
		_, err := io.WriteString(out, "born\n")
		return err
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, missing); s != "born\n" {
		t.Errorf("content %q", s)
	}
}

func TestUpdateStreamRefusals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	writeFile(t, path, "original\n", 0o644)
	before := snap(t, path)
	write := func(s string) func(io.Reader, io.Writer) error {
		return func(_ io.Reader, out io.Writer) error { _, err := io.WriteString(out, s); return err }
	}
	noCheck := func() error { t.Error("check called for an update that publishes nothing"); return nil }

	boom := errors.New("filter failed")
	err := UpdateStream(OS{}, path, Options{}, func(_ io.Reader, out io.Writer) error {
		io.WriteString(out, "partial")
		return boom
	}, noCheck)
	if err != boom {
		t.Errorf("fn's error came back as %v", err)
	}
	before.unchanged(t)

	err = UpdateStream(OS{}, path, Options{}, write(""), noCheck)
	var ee *EmptyError
	if !errors.As(err, &ee) || ee.Missing {
		t.Errorf("empty output: %v, want an *EmptyError", err)
	}
	before.unchanged(t)

	if err := UpdateStream(OS{}, path, Options{}, write("original\n"), noCheck); err != nil {
		t.Errorf("same output: %v", err)
	}
	before.unchanged(t)

	lost := errors.New("lock lost")
	if err := UpdateStream(OS{}, path, Options{}, write("new\n"), func() error { return lost }); err != lost {
		t.Errorf("check's error came back as %v", err)
	}
	before.unchanged(t)

	if err := UpdateStream(&faultFS{writeErr: syscall.ENOSPC}, path, Options{}, write("new\n"), nil); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("a full disk gave %v", err)
	}
	before.unchanged(t)
	if err := UpdateStream(&faultFS{renameErr: syscall.EXDEV}, path, Options{}, write("new\n"), nil); !errors.Is(err, syscall.EXDEV) {
		t.Errorf("a failed rename gave %v", err)
	}
	before.unchanged(t)

	missing := filepath.Join(dir, "new")
	if err := UpdateStream(OS{}, missing, Options{}, write(""), nil); !errors.As(err, &ee) || !ee.Missing {
		t.Errorf("empty output for a missing file: %v, want an *EmptyError of a missing file", err)
	}
	if err := UpdateStream(OS{}, missing, Options{AllowEmpty: true}, write(""), nil); err != nil {
		t.Errorf("empty output allowed for a missing file: %v", err)
	}
	notExist(t, missing)
	if tmp := tempFiles(t, missing); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}

	if err := UpdateStream(OS{}, path, Options{AllowEmpty: true}, write(""), nil); err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, path); s != "" {
		t.Errorf("AllowEmpty: the file holds %q", s)
	}
}

// UpdateStream compares old and new content in pieces: a difference
// anywhere, the last piece included, publishes; none publishes nothing.
func TestUpdateStreamComparesAllContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	old := bytes.Repeat([]byte("0123456789abcdef"), 40000) // 640000 bytes: three pieces
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	emit := func(b []byte) func(io.Reader, io.Writer) error {
		return func(_ io.Reader, out io.Writer) error { _, err := out.Write(b); return err }
	}
	before := snap(t, path)
	if err := UpdateStream(OS{}, path, Options{}, emit(old), nil); err != nil {
		t.Fatal(err)
	}
	before.unchanged(t)

	for _, at := range []int{0, 256 << 10, len(old) - 1} {
		changed := bytes.Clone(old)
		changed[at] = 'X'
		if err := UpdateStream(OS{}, path, Options{}, emit(changed), nil); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, changed) {
			t.Fatalf("a change at byte %d was not published", at)
		}
		os.WriteFile(path, old, 0o644)
	}
	if err := UpdateStream(OS{}, path, Options{}, emit(old[:len(old)-1]), nil); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Size() != int64(len(old)-1) {
		t.Errorf("a shorter output was not published: %d bytes", fi.Size())
	}
}
