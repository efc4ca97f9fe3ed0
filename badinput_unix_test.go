//go:build unix

package hold_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold"
)

// Bad input: each case must fail with a clear *hold.Error, write nothing,
// and never hang.

// holdError asserts err is a *hold.Error matching want and returns it.
func holdError(t *testing.T, what string, err, want error) *hold.Error {
	t.Helper()
	var he *hold.Error
	if !errors.As(err, &he) {
		t.Fatalf("%s: %T %v, want a *hold.Error", what, err, err)
	}
	if want != nil && !errors.Is(err, want) {
		t.Fatalf("%s: %v, want it to match %v", what, err, want)
	}
	t.Logf("%s: %v", what, err)
	return he
}

// dirNames lists dir, for checking that nothing was created in it.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// acquireBoth runs TryAcquire and a bounded Acquire on target and returns
// their errors, failing if either succeeds or hangs.
func acquireBoth(t *testing.T, target string, opts ...hold.Option) (tryErr, waitErr error) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		var l *hold.Lock
		if l, tryErr = hold.TryAcquire(target, opts...); l != nil {
			l.Release()
		}
		ctx, cancel := context.WithTimeout(context.Background(), hangBound)
		defer cancel()
		if l, waitErr = hold.Acquire(ctx, target, opts...); l != nil {
			l.Release()
		}
	}()
	select {
	case <-done:
	case <-time.After(hangBound + 5*time.Second):
		t.Fatalf("acquiring %s hangs", target)
	}
	if tryErr == nil || waitErr == nil {
		t.Fatalf("acquiring %s succeeded (try: %v, wait: %v), want an error", target, tryErr, waitErr)
	}
	return tryErr, waitErr
}

func TestMissingParentDirectory(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "missing", "t")
	tryErr, waitErr := acquireBoth(t, target)
	for _, err := range []error{tryErr, waitErr} {
		he := holdError(t, "missing directory", err, fs.ErrNotExist)
		if he.Path != target+".lock" || !strings.Contains(he.Hint, "does not exist") {
			t.Errorf("error %q: want the lock path and a hint about the missing directory", err)
		}
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("created %v", names)
	}
	// Inspect says the directory is missing, rather than "free": nothing
	// could take the lock there either.
	st, err := hold.Inspect(target)
	if !errors.Is(err, fs.ErrNotExist) || st != nil || !strings.Contains(err.Error(), filepath.Join(dir, "missing")+" does not exist") {
		t.Fatalf("Inspect of a lock in a missing directory: %+v, %v; want an error naming the directory", st, err)
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("Inspect created %v", names)
	}
}

func TestSymlinkAtLockPath(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	const precious = "not yours to overwrite\n"
	if err := os.WriteFile(victim, []byte(precious), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(victim)
	target := filepath.Join(dir, "t")
	if err := os.Symlink(victim, target+".lock"); err != nil {
		t.Fatal(err)
	}
	tryErr, waitErr := acquireBoth(t, target)
	for _, err := range []error{tryErr, waitErr} {
		he := holdError(t, "symlink", err, hold.ErrNotRegular)
		if !strings.Contains(he.Hint, "symbolic link") {
			t.Errorf("hint %q does not say it is a symlink", he.Hint)
		}
	}
	if _, err := hold.Inspect(target); !errors.Is(err, hold.ErrNotRegular) {
		t.Errorf("Inspect through a symlink: %v, want ErrNotRegular", err)
	}
	after, _ := os.Stat(victim)
	if b, _ := os.ReadFile(victim); string(b) != precious || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("the symlink's target was written: %q", b)
	}

	// A dangling symlink must not make hold create its target.
	ghost := filepath.Join(dir, "ghost")
	target2 := filepath.Join(dir, "t2")
	if err := os.Symlink(ghost, target2+".lock"); err != nil {
		t.Fatal(err)
	}
	tryErr, _ = acquireBoth(t, target2)
	holdError(t, "dangling symlink", tryErr, hold.ErrNotRegular)
	if fileExists(ghost) {
		t.Fatal("hold created the target of a dangling symlink")
	}
}

func TestDirectoryAtLockPath(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "t")
	if err := os.Mkdir(target+".lock", 0o755); err != nil {
		t.Fatal(err)
	}
	tryErr, waitErr := acquireBoth(t, target)
	holdError(t, "directory", tryErr, hold.ErrNotRegular)
	holdError(t, "directory", waitErr, hold.ErrNotRegular)
	if names := dirNames(t, target+".lock"); len(names) != 0 {
		t.Fatalf("created %v inside the directory", names)
	}
	if _, err := hold.Inspect(target); !errors.Is(err, hold.ErrNotRegular) {
		t.Errorf("Inspect of a directory: %v, want ErrNotRegular", err)
	}
}

func TestFIFOAtLockPath(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "t")
	if err := unix.Mkfifo(target+".lock", 0o644); err != nil {
		t.Fatal(err)
	}
	tryErr, waitErr := acquireBoth(t, target, hold.Shared())
	for _, err := range []error{tryErr, waitErr} {
		he := holdError(t, "FIFO", err, hold.ErrNotRegular)
		if !strings.Contains(he.Hint, "FIFO") {
			t.Errorf("hint %q does not say it is a FIFO", he.Hint)
		}
	}
	inspected := make(chan error, 1)
	go func() { _, err := hold.Inspect(target); inspected <- err }()
	select {
	case err := <-inspected:
		if !errors.Is(err, hold.ErrNotRegular) {
			t.Errorf("Inspect of a FIFO: %v, want ErrNotRegular", err)
		}
	case <-time.After(hangBound):
		t.Fatal("Inspect of a FIFO hangs")
	}
}

func TestDeviceAsLockFile(t *testing.T) {
	if _, err := os.Stat(os.DevNull); err != nil {
		t.Skip("no null device")
	}
	tryErr, _ := acquireBoth(t, "", hold.LockFile(os.DevNull))
	holdError(t, "device", tryErr, hold.ErrNotRegular)
}

// TestCorruptOrHugeRecord: whatever sits in the lock file, readers
// tolerate it, acquisition works and the token still goes up.
// A lock file that holds anything but a record of hold's is the user's:
// under a derived lock path it is refused with ErrForeign, named with
// LockFile it is locked without being written (no record, no token), and
// in both cases its content stays byte for byte what it was.
func TestForeignLockFileContent(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "t")
	lockPath := target + ".lock"
	l, err := hold.Acquire(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	l.Token() // the record is written once the token is asked for
	live, err := os.ReadFile(lockPath)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	cases := []struct {
		name    string
		content []byte
	}{
		{"garbage", []byte("this is not a lock record\n")},
		{"Cargo.lock", []byte("# This file is automatically @generated by Cargo.\nversion = 3\n")},
		{"truncated record", live[:len(live)/2]},
		{"NUL bytes", make([]byte, 300)},
		{"binary", bytes.Repeat([]byte{0xff, 0x00, '{', '"'}, 1000)},
		{"JSON without a token", []byte(`{"pid":1}` + "\n")},
		{"data JSON with a pid", []byte(`{"pid":1,"host":"x","command":["rm","-rf","/"]}`)},
		{"JSON array", []byte(`[1,2,3]`)},
		{"wrong types", []byte(`{"fence":"many","pid":"x"}`)},
		{"record with an extra key", append(bytes.TrimSuffix(bytes.TrimSpace(live), []byte("}")), `,"extra":1}`...)},
		{"huge record", append(append([]byte(`{"fence":1,"command":["`), bytes.Repeat([]byte("x"), 2<<20)...), `"]}`...)},
		{"huge garbage", bytes.Repeat([]byte("garbage "), 1<<17)},
	}
	for _, c := range cases {
		if err := os.WriteFile(lockPath, c.content, 0o644); err != nil {
			t.Fatal(err)
		}
		same := func(when string) {
			t.Helper()
			b, err := os.ReadFile(lockPath)
			if err != nil || !bytes.Equal(b, c.content) {
				t.Fatalf("%s: %s: the file changed (%d bytes, was %d; %v)", c.name, when, len(b), len(c.content), err)
			}
		}
		_, err := hold.Acquire(context.Background(), target)
		holdError(t, c.name+": derived path", err, hold.ErrForeign)
		_, err = hold.TryAcquire(target)
		holdError(t, c.name+": derived path, try", err, hold.ErrForeign)
		same("after the refusals")
		if st, err := hold.Inspect(target); err != nil || (st.Holder != nil && st.Holder.Owner != nil) {
			t.Fatalf("%s: Inspect reports %+v, %v: data read as an owner record", c.name, st, err)
		}

		l, err := hold.Acquire(context.Background(), "", hold.LockFile(lockPath))
		if err != nil {
			t.Fatalf("%s: LockFile: %v", c.name, err)
		}
		if l.Token() != 0 || !errors.Is(l.TokenError(), hold.ErrNoToken) {
			t.Fatalf("%s: token %d, TokenError %v; want 0 and ErrNoToken", c.name, l.Token(), l.TokenError())
		}
		_, err = hold.TryAcquire("", hold.LockFile(lockPath))
		holdError(t, c.name+": busy", err, hold.ErrBusy)
		if err := l.Release(); err != nil {
			t.Fatal(err)
		}
		same("after a lock and release through LockFile")
	}
}

// otherUser is who the permission tests run a worker as when the tests
// run as root (as in CI), since root ignores permission bits: the
// conventional unprivileged "nobody".
const otherUser = 65534

// startOtherUserWorker runs a core-hold worker as otherUser from a copy of
// the test binary that user may run, under base.
func startOtherUserWorker(t *testing.T, base string, env ...string) *coreWorker {
	t.Helper()
	bin := filepath.Join(base, "hold.test")
	if !fileExists(bin) {
		src, err := os.Open(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		dst, err := os.OpenFile(bin, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		if err := dst.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Dir = base
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: otherUser, Gid: otherUser}}
	return startCoreWorkerCmd(t, cmd, "core-hold", append(env, "HOME="+base, "TMPDIR="+base, "XDG_RUNTIME_DIR=")...)
}

// worldDir makes a directory everyone can enter and read, outside the
// test's private temporary directory (which another user cannot enter).
func worldDir(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("", "hold-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	return base
}

// TestUnwritableDirectory: a lock in a directory we may not write fails
// with a permission error and creates nothing. As root (which may write
// anywhere) the attempt is made by a worker running as another user.
func TestUnwritableDirectory(t *testing.T) {
	base := worldDir(t)
	ro := filepath.Join(base, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(ro, "t")
	if os.Geteuid() == 0 {
		w := startOtherUserWorker(t, base, "CORE_TARGET="+target, "CORE_TRY=1", "CORE_RELEASE=now")
		r := w.report(t, hangBound)
		t.Logf("as uid %d: %s", otherUser, r.Err)
		if !r.IsHoldErr || !r.Permission || !strings.Contains(r.Err, "permission") || !strings.Contains(r.Err, target+".lock") {
			t.Fatalf("as uid %d in a read-only directory: %+v, want a *hold.Error about permission naming the lock path", otherUser, r)
		}
	} else {
		if f, err := os.Create(filepath.Join(ro, "probe")); err == nil {
			f.Close()
			t.Skip("this user may write a directory of mode 0555 (a capability?); nothing to test")
		}
		tryErr, waitErr := acquireBoth(t, target)
		holdError(t, "read-only directory", tryErr, fs.ErrPermission)
		holdError(t, "read-only directory", waitErr, fs.ErrPermission)
	}
	if names := dirNames(t, ro); len(names) != 0 {
		t.Fatalf("created %v in a read-only directory", names)
	}
}

// TestLockFileNotWritable: a lock file this process may open but not
// write (another user's) still locks, both ways; the owner record is left
// alone and the token is 0, meaning "none".
func TestLockFileNotWritable(t *testing.T) {
	base := worldDir(t)
	target := filepath.Join(base, "t")
	lockPath := target + ".lock"
	l, err := hold.Acquire(context.Background(), target)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if err := os.Chmod(lockPath, 0o444); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(lockPath)
	if err != nil {
		t.Fatal(err)
	}

	if os.Geteuid() != 0 {
		// Not root: a read-only file of our own is "not writable" to us.
		mine, err := hold.Acquire(context.Background(), target)
		if err != nil {
			t.Fatalf("read-only lock file: %v", err)
		}
		if mine.Token() != 0 {
			t.Errorf("token %d on a lock file we cannot write, want 0", mine.Token())
		}
		// It still excludes.
		_, err = hold.TryAcquire(target)
		holdError(t, "busy through a read-only lock file", err, hold.ErrBusy)
		mine.Release()
	} else {
		// Root holds: the other user is refused.
		mine, err := hold.Acquire(context.Background(), target)
		if err != nil {
			t.Fatal(err)
		}
		w := startOtherUserWorker(t, base, "CORE_TARGET="+target, "CORE_TRY=1", "CORE_RELEASE=now")
		r := w.report(t, hangBound)
		if !r.Busy || r.HolderPID != os.Getpid() {
			t.Fatalf("uid %d while root holds: %+v, want busy naming pid %d", otherUser, r, os.Getpid())
		}
		mine.Release()
		before, _ = os.ReadFile(lockPath)

		// The other user holds through a read-only descriptor: root is
		// refused, and the other user's token is 0.
		release := filepath.Join(base, "release")
		w = startOtherUserWorker(t, base, "CORE_TARGET="+target, "CORE_RELEASE="+release)
		r = w.report(t, hangBound)
		if r.Err != "" || r.Token != 0 {
			t.Fatalf("uid %d on root's lock file: %+v, want the lock with token 0", otherUser, r)
		}
		_, err = hold.TryAcquire(target)
		he := holdError(t, "held by another user", err, hold.ErrBusy)
		// The record is root's, marked released: it must not be taken
		// for the holder's. Where the kernel can be asked, the holder is
		// named right.
		if he.Holder != nil && he.Holder.Owner != nil && he.Holder.Owner.PID == os.Getpid() {
			t.Errorf("the error names this process, whose record is a leftover: %v", err)
		}
		if _, _, ok := kernelLocks(lockPath); ok && !strings.Contains(err.Error(), fmt.Sprintf("pid %d", r.PID)) {
			t.Errorf("the error does not name the holder, pid %d: %v", r.PID, err)
		}
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := w.wait(t, hangBound); err != nil {
			t.Fatalf("worker: %v\n%s", err, w.out.String())
		}
	}
	after, _ := os.ReadFile(lockPath)
	if !bytes.Equal(before, after) {
		t.Fatalf("a holder that may not write the lock file changed it:\n%s\n->\n%s", before, after)
	}
}
