//go:build unix

package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"

	"golang.org/x/sys/unix"
)

// Tests that a replacement is everything the file was besides its
// content (mode bits, owner and group), or is refused before anything is
// written: hard links it would split, owners it cannot give.

func ownerOfFile(t *testing.T, path string) (uid, gid int) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// The permission bits and the setuid, setgid and sticky bits are kept.
func TestUpdateKeepsModeBits(t *testing.T) {
	dir := t.TempDir()
	for _, mode := range []fs.FileMode{0o751, 0o600 | fs.ModeSetgid, 0o755 | fs.ModeSetuid, 0o644 | fs.ModeSticky} {
		path := filepath.Join(dir, "f")
		writeFile(t, path, "a", 0o600)
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		before, _ := os.Stat(path)
		if err := UpdateWith(OS{}, path, Options{}, setTo("b"), nil); err != nil {
			t.Fatal(err)
		}
		after, _ := os.Stat(path)
		if os.SameFile(before, after) || after.Mode() != before.Mode() {
			t.Errorf("mode %v after the update, want %v (replaced: %v)", after.Mode(), before.Mode(), !os.SameFile(before, after))
		}
		os.Remove(path)
	}
}

// Until it is published the replacement is private (0600), whatever the
// file's mode: no one else reads a half-written copy. A new file gets
// what umask allows, as any created file does.
func TestUpdateTempFileIsPrivate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	writeFile(t, path, "a", 0o644)
	var seen []fs.FileMode
	fsys := &faultFS{onWrite: func(f File) {
		if fi, err := f.Stat(); err == nil {
			seen = append(seen, fi.Mode().Perm())
		}
	}}
	if err := UpdateWith(fsys, path, Options{}, setTo("b"), nil); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != 0o600 {
		t.Errorf("the temp file's mode while written: %v, want 0600", seen)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("the published file's mode %v, want the original 0644", fi.Mode().Perm())
	}

	old := unix.Umask(0o027)
	defer unix.Umask(old)
	created := filepath.Join(dir, "new")
	if err := UpdateWith(OS{}, created, Options{}, setTo("b"), nil); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(created); fi.Mode().Perm() != 0o640 {
		t.Errorf("a new file's mode %v, want 0666 less the umask 027", fi.Mode().Perm())
	}
}

// Root keeps another user's file theirs, and the setuid bit with it
// (chown clears it, so the mode must be set after the owner).
func TestUpdateKeepsOwner(t *testing.T) {
	testenv.NeedRoot(t, "files of another user")
	path := filepath.Join(t.TempDir(), "tool")
	writeFile(t, path, "a", 0o755)
	testenv.Lchown(t, path, testenv.Someone, testenv.SomeGroup)
	os.Chmod(path, 0o755|fs.ModeSetuid|fs.ModeSetgid)
	before, _ := os.Stat(path)
	if err := UpdateWith(OS{}, path, Options{}, setTo("b"), nil); err != nil {
		t.Fatal(err)
	}
	if uid, gid := ownerOfFile(t, path); uid != testenv.Someone || gid != testenv.SomeGroup {
		t.Errorf("owner %d:%d after the update, want %d:%d", uid, gid, testenv.Someone, testenv.SomeGroup)
	}
	if after, _ := os.Stat(path); after.Mode() != before.Mode() {
		t.Errorf("mode %v after the update, want %v", after.Mode(), before.Mode())
	}
}

// A chown that fails (here for root too) refuses the update, naming the
// owner, and publishes nothing; with AllowOwnerChange the update goes on
// with the group kept where it can be, and says what changed.
func TestUpdateOwnerChown(t *testing.T) {
	testenv.NeedRoot(t, "files of another user")
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "original\n", 0o644)
	testenv.Lchown(t, path, testenv.Someone, testenv.SomeGroup)
	before := snap(t, path)

	err := UpdateWith(&faultFS{chownErr: syscall.EPERM}, path, Options{}, setTo("new\n"), nil)
	var oe *OwnerError
	if !errors.As(err, &oe) || oe.UID != testenv.Someone || oe.GID != testenv.SomeGroup || !errors.Is(err, syscall.EPERM) {
		t.Fatalf("a failed chown: %v, want an *OwnerError of %d:%d wrapping EPERM", err, testenv.Someone, testenv.SomeGroup)
	}
	if !errors.Is(err, ErrOwnerNotKept) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("%v does not match ErrOwnerNotKept and fs.ErrPermission", err)
	}
	before.unchanged(t)

	var warned []error
	o := Options{AllowOwnerChange: true, Warn: func(err error) { warned = append(warned, err) }}
	if err := UpdateWith(&faultFS{chownErr: syscall.EPERM, chownOwnerOnly: true}, path, o, setTo("new\n"), nil); err != nil {
		t.Fatal(err)
	}
	if uid, gid := ownerOfFile(t, path); uid != 0 || gid != testenv.SomeGroup {
		t.Errorf("owner %d:%d, want this process's user and the file's group 0:%d", uid, gid, testenv.SomeGroup)
	}
	var oc *OwnerChange
	if len(warned) != 1 || !errors.As(warned[0], &oc) || *oc != (OwnerChange{Path: path, FromUID: testenv.Someone, FromGID: testenv.SomeGroup, ToUID: 0, ToGID: testenv.SomeGroup}) {
		t.Errorf("warnings %v, want one *OwnerChange from %d:%d to 0:%d", warned, testenv.Someone, testenv.SomeGroup, testenv.SomeGroup)
	}
	if s := readFile(t, path); s != "new\n" {
		t.Errorf("content %q", s)
	}
}

// An update of a file with other names would leave them the old content:
// it is refused before fn runs, unless AllowSplit. Append writes in place
// and is fine.
func TestUpdateRefusesHardLinkedFile(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	writeFile(t, a, "shared\n", 0o644)
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	before := snap(t, a)
	err := UpdateWith(OS{}, a, Options{}, func([]byte) ([]byte, error) {
		t.Error("fn called for a hard-linked file")
		return []byte("split\n"), nil
	}, nil)
	var he *HardLinkError
	if !errors.As(err, &he) || he.Path != a || he.Links != 2 {
		t.Fatalf("a file with two names: %v, want a *HardLinkError of 2 links", err)
	}
	if !errors.Is(err, ErrHardLinked) || !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "the other name keeps") {
		t.Errorf("unclear error: %v", err)
	}
	before.unchanged(t)
	if err := UpdateStream(OS{}, a, Options{}, nil, nil); !errors.As(err, &he) {
		t.Errorf("UpdateStream of a hard-linked file: %v", err)
	}
	os.Link(a, c)
	if _, _, err := Open(OS{}, a, Options{}); !errors.As(err, &he) || he.Links != 3 || !strings.Contains(err.Error(), "the other 2 names keep") {
		t.Errorf("a file with three names: %v", err)
	}

	if err := AppendTo(OS{}, a, true, []byte("appended\n"), nil); err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, b); s != "shared\nappended\n" {
		t.Errorf("the other name reads %q after an append", s)
	}
	if err := UpdateWith(OS{}, a, Options{AllowSplit: true}, setTo("split\n"), nil); err != nil {
		t.Fatal(err)
	}
	if sa, sb := readFile(t, a), readFile(t, b); sa != "split\n" || sb != "shared\nappended\n" {
		t.Errorf("after AllowSplit: a %q, b %q", sa, sb)
	}
}

func TestSysUnix(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	writeFile(t, path, "x", 0o644)
	fi, _ := os.Stat(path)
	if uid, gid, ok := ownerOf(fi); !ok || uid != os.Geteuid() || gid != os.Getegid() {
		t.Errorf("ownerOf = %d, %d, %v", uid, gid, ok)
	}
	if n := linkCount(fi); n != 1 {
		t.Errorf("linkCount of a file with one name = %d", n)
	}
	os.Link(path, path+"2")
	fi, _ = os.Stat(path)
	if n := linkCount(fi); n != 2 {
		t.Errorf("linkCount of a file with two names = %d", n)
	}
	if !inGroup(os.Getegid()) {
		t.Error("not in its own group")
	}
	if inGroup(testenv.SomeGroup) {
		t.Errorf("in group %d", testenv.SomeGroup)
	}
	if err := syncDir(dir); err != nil {
		t.Errorf("syncDir: %v", err)
	}
	if err := syncDir(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("syncDir of a missing directory: %v", err)
	}
	if err := writable(path); err != nil {
		t.Errorf("writable of a writable file: %v", err)
	}
	if err := writable(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("writable of a missing file: %v", err)
	}
}
