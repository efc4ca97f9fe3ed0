package hold

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/atomicfile"
	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/lock"
)

// faultFS is the real file system with chosen steps failing, to simulate a
// full disk, a failing device or a read-only file system.
type faultFS struct {
	atomicfile.OS
	createErr error // OpenFile with O_CREATE fails
	writeErr  error // Write writes half, then fails
	syncErr   error // File.Sync fails
	renameErr error // Rename fails
	// syncDirErr makes the directory sync after the rename fail.
	syncDirErr error
	// xattrErr makes setting extended attribute xattrName fail.
	xattrName string
	xattrErr  error
}

func (f *faultFS) SyncDir(name string) error {
	if f.syncDirErr != nil {
		return &fs.PathError{Op: "fsync", Path: name, Err: f.syncDirErr}
	}
	return f.OS.SyncDir(name)
}

func (f *faultFS) SetXattr(file atomicfile.File, name string, value []byte) error {
	if f.xattrErr != nil && name == f.xattrName {
		return f.xattrErr
	}
	return f.OS.SetXattr(file, name, value)
}

func (f *faultFS) OpenFile(name string, flag int, perm fs.FileMode) (atomicfile.File, error) {
	if f.createErr != nil && flag&os.O_CREATE != 0 {
		return nil, &fs.PathError{Op: "open", Path: name, Err: f.createErr}
	}
	file, err := f.OS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFS) Rename(oldpath, newpath string) error {
	if f.renameErr != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: f.renameErr}
	}
	return f.OS.Rename(oldpath, newpath)
}

type faultFile struct {
	atomicfile.File
	fs *faultFS
}

func (f *faultFile) Write(p []byte) (int, error) {
	if f.fs.writeErr != nil {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, &fs.PathError{Op: "write", Path: f.Name(), Err: f.fs.writeErr}
	}
	return f.File.Write(p)
}

func (f *faultFile) Sync() error {
	if f.fs.syncErr != nil {
		return &fs.PathError{Op: "sync", Path: f.Name(), Err: f.fs.syncErr}
	}
	return f.File.Sync()
}

// readFile and writeFile are testenv's, by the names these tests use.
var (
	readFile  = testenv.ReadFile
	writeFile = testenv.WriteFile
)

func setTo(s string) func([]byte) ([]byte, error) {
	return func([]byte) ([]byte, error) { return []byte(s), nil }
}

// checkHoldError checks that err is an *Error of op and matches want.
func checkHoldError(t *testing.T, err error, op string, want error) {
	t.Helper()
	var he *Error
	if !errors.As(err, &he) {
		t.Fatalf("error %v (%T) is not a *hold.Error", err, err)
	}
	if he.Op != op {
		t.Errorf("Op = %q, want %q (error: %v)", he.Op, op, err)
	}
	if want != nil && !errors.Is(err, want) {
		t.Errorf("error %v does not match %v", err, want)
	}
}

// checkNotLocked checks that the lock on path is free again.
func checkNotLocked(t *testing.T, path string) {
	t.Helper()
	l, err := TryAcquire(path)
	if err != nil {
		t.Fatalf("lock still held after the operation: %v", err)
	}
	l.Release()
}

func TestUpdateReplacesContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.json")
	writeFile(t, path, `{"n":1}`, 0o640)
	var got []byte
	err := Update(context.Background(), path, func(old []byte) ([]byte, error) {
		got = old
		return []byte(`{"n":2}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != `{"n":1}` {
		t.Errorf("fn got %q", got)
	}
	if s := readFile(t, path); s != `{"n":2}` {
		t.Errorf("content %q", s)
	}
	fi, _ := os.Stat(path)
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o640 {
		t.Errorf("permission %v, want the original 0640", fi.Mode().Perm())
	}
	if _, err := os.Stat(path + ".lock"); err != nil {
		t.Errorf("lock file <path>.lock: %v", err)
	}
	if tmp := tempFiles(t, path); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}
	checkNotLocked(t, path)
}

func TestUpdateKeepsSpecialBits(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no setgid bit on Windows")
	}
	path := filepath.Join(t.TempDir(), "script")
	writeFile(t, path, "a", 0o755)
	if err := os.Chmod(path, 0o755|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	if err := Update(context.Background(), path, setTo("b")); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode()&(fs.ModePerm|fs.ModeSetgid) != 0o755|fs.ModeSetgid {
		t.Errorf("mode %v, want the original setgid 0755", fi.Mode())
	}
}

func TestUpdateFnErrorWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "original", 0o644)
	before, _ := os.Stat(path)
	boom := errors.New("boom")
	err := Update(context.Background(), path, func([]byte) ([]byte, error) { return []byte("x"), boom })
	if err != boom {
		t.Fatalf("Update returned %v, want fn's error unchanged", err)
	}
	after, _ := os.Stat(path)
	if s := readFile(t, path); s != "original" || !os.SameFile(before, after) {
		t.Errorf("file changed: %q, same inode %v", s, os.SameFile(before, after))
	}
	if tmp := tempFiles(t, path); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}
	checkNotLocked(t, path)
}

func TestUpdateUnchangedWritesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "same", 0o644)
	before, _ := os.Stat(path)
	if err := Update(context.Background(), path, func(old []byte) ([]byte, error) { return append([]byte(nil), old...), nil }); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if !os.SameFile(before, after) {
		t.Error("unchanged content was rewritten (new inode)")
	}
}

func TestUpdatePanicReleasesLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "original", 0o644)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic did not propagate")
			}
		}()
		Update(context.Background(), path, func([]byte) ([]byte, error) { panic("in fn") })
	}()
	checkNotLocked(t, path)
	if s := readFile(t, path); s != "original" {
		t.Errorf("content %q", s)
	}
}

func TestUpdateMissingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new")
	var got []byte = []byte("sentinel")
	if err := Update(context.Background(), path, func(old []byte) ([]byte, error) {
		got = old
		return []byte("created\n"), nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("a missing file read as %q, want empty", got)
	}
	if s := readFile(t, path); s != "created\n" {
		t.Errorf("content %q", s)
	}

	// Nothing to write for a missing file: it is not created (and empty
	// content is refused, unless allowed).
	empty := filepath.Join(dir, "empty")
	checkHoldError(t, Update(context.Background(), empty, setTo("")), "update", ErrEmpty)
	if err := Update(context.Background(), empty, setTo(""), AllowEmpty()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(empty); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an update to empty content created the file: %v", err)
	}

	// MustExist turns a missing file into an error and calls no fn.
	strict := filepath.Join(dir, "strict")
	err := Update(context.Background(), strict, func([]byte) ([]byte, error) {
		t.Error("fn called for a missing file under MustExist")
		return []byte("x"), nil
	}, MustExist())
	checkHoldError(t, err, "update", fs.ErrNotExist)
	if _, err := os.Stat(strict); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("file created under MustExist: %v", err)
	}
}

func TestUpdateThroughSymlink(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on Windows")
	}
	dir := t.TempDir()
	real := filepath.Join(dir, "data", "real.json")
	os.Mkdir(filepath.Dir(real), 0o755)
	writeFile(t, real, "v1", 0o600)
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink("data/real.json", link); err != nil { // relative, resolved against the link's directory
		t.Fatal(err)
	}
	if err := Update(context.Background(), link, setTo("v2")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("the link is no longer a link: %v %v", fi.Mode(), err)
	}
	if s := readFile(t, real); s != "v2" {
		t.Errorf("target content %q, want v2", s)
	}
	if fi, _ := os.Stat(real); fi.Mode().Perm() != 0o600 {
		t.Errorf("target permission %v, want 0600", fi.Mode().Perm())
	}
	if tmp := tempFiles(t, real); len(tmp) > 0 {
		t.Errorf("temp files left beside the target: %v", tmp)
	}

	// A dangling link names the file to create.
	dangling := filepath.Join(dir, "dangling")
	os.Symlink("data/created", dangling)
	if err := Update(context.Background(), dangling, setTo("born")); err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, filepath.Join(dir, "data", "created")); s != "born" {
		t.Errorf("created target %q", s)
	}

	// A loop is an error, not a hang.
	loop := filepath.Join(dir, "loop")
	os.Symlink("loop", loop)
	if err := Update(context.Background(), loop, setTo("x")); err == nil {
		t.Error("a symlink loop was accepted")
	}
}

func TestUpdateRefusesDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	os.Mkdir(dir, 0o755)
	err := Update(context.Background(), dir, func([]byte) ([]byte, error) {
		t.Error("fn called for a directory")
		return nil, nil
	})
	checkHoldError(t, err, "update", syscall.EISDIR)
	if _, err := os.Stat(dir + ".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a lock file was created beside a directory target: %v", err)
	}
}

// When the lock file exists already the check before the lock is skipped
// (it only guards the lock file's creation): the check under the lock
// must refuse the directory all the same, for Update and Append.
func TestGuardedRefusesDirectoryWithExistingLockFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "d")
	os.Mkdir(dir, 0o755)
	writeFile(t, dir+".lock", "", 0o666)
	err := Update(context.Background(), dir, func([]byte) ([]byte, error) {
		t.Error("fn called for a directory")
		return nil, nil
	})
	checkHoldError(t, err, "update", syscall.EISDIR)
	err = Append(context.Background(), dir, []byte("x\n"))
	checkHoldError(t, err, "append", syscall.EISDIR)
}

func TestUpdateRefusesReadOnlyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ro")
	writeFile(t, path, "keep", 0o444)
	err := Update(context.Background(), path, setTo("changed"))
	checkHoldError(t, err, "update", atomicfile.ErrReadOnly)
	if !strings.Contains(err.Error(), "chmod") {
		t.Errorf("error gives no hint: %v", err)
	}
	if s := readFile(t, path); s != "keep" {
		t.Errorf("read-only file changed to %q", s)
	}
}

// faultCase is a fault of faultFS and the error it must surface.
type faultCase struct {
	name string
	fs   *faultFS
	want error
}

// eachWriteFault runs test as a subtest for each fault that a write of a
// guarded file meets (a full disk, a failing device, a read-only file
// system), then for each of more.
func eachWriteFault(t *testing.T, more []faultCase, test func(t *testing.T, c faultCase)) {
	cases := append([]faultCase{
		{"disk full mid-write", &faultFS{writeErr: syscall.ENOSPC}, syscall.ENOSPC},
		{"fsync fails", &faultFS{syncErr: syscall.EIO}, syscall.EIO},
		{"read-only file system", &faultFS{createErr: syscall.EROFS}, syscall.EROFS},
	}, more...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { test(t, c) })
	}
}

func TestUpdateWriteFailuresLeaveOriginal(t *testing.T) {
	rename := []faultCase{{"rename fails", &faultFS{renameErr: syscall.EXDEV}, syscall.EXDEV}}
	eachWriteFault(t, rename, func(t *testing.T, c faultCase) {
		path := filepath.Join(t.TempDir(), "f")
		writeFile(t, path, "original", 0o644)
		err := update(context.Background(), c.fs, path, setTo(strings.Repeat("new ", 10000)), nil)
		checkHoldError(t, err, "update", c.want)
		if s := readFile(t, path); s != "original" {
			t.Errorf("original changed to %d bytes", len(s))
		}
		if tmp := tempFiles(t, path); len(tmp) > 0 {
			t.Errorf("temp files left: %v", tmp)
		}
		checkNotLocked(t, path)
	})
}

// lostProtocol is the kernel lock, except that its locks report being
// lost, as a lease-based lock would after a long pause.
type lostProtocol struct{ flock.Protocol }

type lostHandle struct{ lock.Handle }

func (lostHandle) Check() error { return &Error{Op: "check", Err: ErrLost} }

func (p lostProtocol) Acquire(ctx context.Context, req *Request) (Handle, error) {
	h, err := p.Protocol.Acquire(ctx, req)
	if err != nil {
		return nil, err
	}
	return lostHandle{h}, nil
}

func TestUpdateLostLockPublishesNothing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "original", 0o644)
	err := Update(context.Background(), path, setTo("unprotected"), WithProtocol(lostProtocol{}))
	checkHoldError(t, err, "update", ErrLost)
	if s := readFile(t, path); s != "original" {
		t.Errorf("a lost lock published %q", s)
	}
	if tmp := tempFiles(t, path); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}
}

func TestUpdateWaitsForHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	l, err := Acquire(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = Update(ctx, path, setTo("x"))
	checkHoldError(t, err, "update", ErrTimeout)
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("file written without the lock: %v", err)
	}
}

// TestUpdateConcurrentProcesses: 16 processes each increment a JSON
// counter 50 times; an update lost to a race would show as a smaller total.
func TestUpdateConcurrentProcesses(t *testing.T) {
	const procs, each = 16, 50
	path := filepath.Join(t.TempDir(), "counter.json")
	runGuardedWorkers(t, procs, func(int) []string {
		return []string{"guarded-increment", "GUARDED_FILE=" + path, fmt.Sprint("GUARDED_N=", each)}
	})
	var c counter
	if err := json.Unmarshal([]byte(readFile(t, path)), &c); err != nil {
		t.Fatal(err)
	}
	if c.N != procs*each {
		t.Errorf("counter = %d, want %d: updates were lost", c.N, procs*each)
	}
	if tmp := tempFiles(t, path); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}
}

// TestUpdateKilledAtRandomMoments SIGKILLs updaters of a large file at
// random moments between reading the file and finishing. The file must
// always be exactly the old or the new content, and the next successful
// update must remove the temp files the killed ones left. The trials run
// in a few lanes at once, each on its own file, to bound the test's time.
func TestUpdateKilledAtRandomMoments(t *testing.T) {
	const size = 4 << 20
	const lanes, trials = 5, 10 // 50 kills
	a, b := flipContents(size)

	// How long the write takes here (from fn to published), to spread
	// the kills over it.
	calib := filepath.Join(t.TempDir(), "calib")
	os.WriteFile(calib, a, 0o644)
	cmd, out := startGuardedWorker(t, "guarded-flip", "GUARDED_FILE="+calib, fmt.Sprint("GUARDED_SIZE=", size))
	waitOutput(t, out, "fn called", 30*time.Second)
	start := time.Now()
	waitOutput(t, out, "published", 30*time.Second)
	write := time.Since(start) + time.Millisecond
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !bytes.Equal([]byte(readFile(t, calib)), b) {
		t.Fatal("uninterrupted update did not publish")
	}

	type tally struct{ old, new, temps int }
	results := make(chan tally, lanes)
	for lane := range lanes {
		go func() {
			var n tally
			defer func() { results <- n }()
			path := filepath.Join(t.TempDir(), fmt.Sprint("big", lane))
			os.WriteFile(path, a, 0o644)
			for range trials {
				before, _ := os.ReadFile(path)
				cmd, out := startGuardedWorker(t, "guarded-flip", "GUARDED_FILE="+path, fmt.Sprint("GUARDED_SIZE=", size))
				deadline := time.Now().Add(30 * time.Second)
				for !strings.Contains(out.String(), "fn called") && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
				time.Sleep(time.Duration(rand.Int64N(int64(write))))
				cmd.Process.Kill()
				cmd.Wait()
				got, err := os.ReadFile(path)
				if err != nil {
					t.Error(err)
					return
				}
				switch {
				case bytes.Equal(got, before):
					n.old++
				case bytes.Equal(got, a), bytes.Equal(got, b):
					n.new++
				default:
					t.Errorf("after a kill the file is neither old nor new content: %d bytes", len(got))
					return
				}
				n.temps += len(tempFiles(t, path))
			}
			cur, _ := os.ReadFile(path)
			if err := Update(context.Background(), path, func(old []byte) ([]byte, error) { return append(old, 'x'), nil }); err != nil {
				t.Error(err)
				return
			}
			if got, _ := os.ReadFile(path); string(got) != string(cur)+"x" {
				t.Error("final update wrong")
			}
			if tmp := tempFiles(t, path); len(tmp) > 0 {
				t.Errorf("temp files left after a successful update: %v", tmp)
			}
		}()
	}
	var sum tally
	for range lanes {
		n := <-results
		sum.old, sum.new, sum.temps = sum.old+n.old, sum.new+n.new, sum.temps+n.temps
	}
	t.Logf("the write took %v; after %d kills: %d old, %d new; temp files seen after kills: %d (summed over trials)",
		write, lanes*trials, sum.old, sum.new, sum.temps)
}

// TestUpdateRemovesTempOfKilledUpdater kills an updater exactly between
// writing its temp file and renaming it, and checks that the next
// successful update removes that temp file but no file of anyone else.
func TestUpdateRemovesTempOfKilledUpdater(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	writeFile(t, path, "original", 0o644)
	cmd, out := startGuardedWorker(t, "guarded-stall-before-rename", "GUARDED_FILE="+path)
	waitOutput(t, out, "stalled at rename", 30*time.Second)
	tmp := tempFiles(t, path)
	if len(tmp) != 1 {
		t.Fatalf("want the stalled updater's one temp file, found %v", tmp)
	}
	cmd.Process.Kill()
	cmd.Wait()

	// Look-alikes that are not abandoned temps of ours must survive:
	// a user's file, and a temp of a live process (this one).
	self := filepath.Base(tmp[0])
	i := strings.Index(self, ".hold-")
	mine := filepath.Join(dir, self[:i]+".hold-"+strings.SplitN(self[i+6:], "-", 2)[0]+fmt.Sprintf("-%d-%d-0123456789ab.tmp", os.Getpid(), proc.Self().ProcStart))
	user := filepath.Join(dir, ".f.hold-notes.tmp")
	for _, p := range []string{mine, user} {
		writeFile(t, p, "keep", 0o644)
	}

	if s := readFile(t, path); s != "original" {
		t.Fatalf("killed updater published %q", s)
	}
	if err := Update(context.Background(), path, setTo("next")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the killed updater's temp file survived: %v", err)
	}
	for _, p := range []string{mine, user} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(p), err)
		}
	}
}

// TestUpdateRefusesEmptyContent: empty content from fn is refused, the
// file left as it was, unless AllowEmpty; a missing file is never created
// by it, and the hint says what works instead.
func TestUpdateRefusesEmptyContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	writeFile(t, path, "keep", 0o644)
	for _, empty := range [][]byte{nil, {}} {
		err := Update(context.Background(), path, func([]byte) ([]byte, error) { return empty, nil })
		checkHoldError(t, err, "update", ErrEmpty)
		if errors.Is(err, fs.ErrPermission) {
			t.Errorf("ErrEmpty matches fs.ErrPermission: %v", err)
		}
		if s := readFile(t, path); s != "keep" {
			t.Fatalf("refused, the file holds %q", s)
		}
	}
	if err := Update(context.Background(), path, setTo(""), AllowEmpty()); err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, path); s != "" {
		t.Fatalf("AllowEmpty: the file holds %q", s)
	}
	missing := filepath.Join(dir, "new.json")
	err := Update(context.Background(), missing, setTo(""))
	checkHoldError(t, err, "update", ErrEmpty)
	if !strings.Contains(err.Error(), "create the file first") {
		t.Errorf("no advice for a missing file: %v", err)
	}
	if _, err := os.Stat(missing + ".lock"); runtime.GOOS == "linux" && !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the refused update left the lock file it created: %v", err)
	}
	if err := Update(context.Background(), missing, setTo(""), AllowEmpty()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty content created %s: %v", missing, err)
	}
}
