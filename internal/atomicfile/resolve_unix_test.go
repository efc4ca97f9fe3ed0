//go:build unix

package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// Symlinks are followed to the file they end at, relative ones against
// their own directory; the links stay links, and a dangling one names
// the file to create.
func TestResolveFollowsSymlinks(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "data", "real.json")
	os.Mkdir(filepath.Dir(real), 0o755)
	writeFile(t, real, "v1", 0o600)
	rel := filepath.Join(dir, "rel")
	abs := filepath.Join(dir, "abs")
	chain := filepath.Join(dir, "data", "chain")
	os.Symlink("data/real.json", rel)
	os.Symlink(rel, abs)
	os.Symlink("../abs", chain)
	for _, link := range []string{rel, abs, chain} {
		tg, err := Resolve(OS{}, link)
		if err != nil || tg.Path != real || tg.Info == nil {
			t.Errorf("Resolve(%s) = %+v, %v; want %s", filepath.Base(link), tg, err, real)
		}
	}
	if err := UpdateWith(OS{}, chain, Options{}, setTo("v2"), nil); err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, real); s != "v2" {
		t.Errorf("target content %q", s)
	}
	for _, link := range []string{rel, abs, chain} {
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("%s is no longer a link: %v", filepath.Base(link), err)
		}
	}
	if fi, _ := os.Stat(real); fi.Mode().Perm() != 0o600 {
		t.Errorf("target permission %v, want 0600", fi.Mode().Perm())
	}
	if tmp := tempFiles(t, real); len(tmp) > 0 {
		t.Errorf("temp files left beside the target: %v", tmp)
	}
	if tmp := tempFiles(t, chain); len(tmp) > 0 {
		t.Errorf("temp files left beside the link: %v", tmp)
	}

	dangling := filepath.Join(dir, "dangling")
	os.Symlink("data/created", dangling)
	tg, err := Resolve(OS{}, dangling)
	if err != nil || tg.Path != filepath.Join(dir, "data", "created") || tg.Info != nil {
		t.Errorf("Resolve of a dangling link = %+v, %v", tg, err)
	}
	if err := AppendTo(OS{}, dangling, false, []byte("born\n"), nil); err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, tg.Path); s != "born\n" {
		t.Errorf("created target %q", s)
	}
}

// A loop is an error, not a hang.
func TestResolveSymlinkLoop(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.Symlink("b", a)
	os.Symlink("a", b)
	done := make(chan error, 1)
	go func() { _, err := Resolve(OS{}, a); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "too many levels of symbolic links") {
			t.Errorf("a symlink loop: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Resolve of a symlink loop did not return")
	}
}

// A FIFO (or a device, a socket) is no file to replace or append to: it
// is refused when resolved, and again when opened, should it have
// appeared since.
func TestRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	// Held open for reading and writing, so that no open of it blocks.
	held, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	for name, f := range map[string]func(FS, string) (*Target, error){"Resolve": Resolve, "Locate": Locate} {
		if _, err := f(OS{}, fifo); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s of a FIFO: %v, want ErrNotRegular", name, err)
		}
	}
	if err := AppendTo(OS{}, fifo, false, []byte("x"), nil); !errors.Is(err, ErrNotRegular) {
		t.Errorf("AppendTo a FIFO: %v", err)
	}

	// Resolve saw a regular file; the FIFO is what gets opened.
	plain := filepath.Join(dir, "plain")
	writeFile(t, plain, "x", 0o644)
	fi, _ := os.Lstat(plain)
	fsys := swapFS{path: fifo, as: fi}
	// An update that read the FIFO would wait for its writer forever.
	done := make(chan error, 1)
	go func() {
		done <- UpdateWith(fsys, fifo, Options{}, func([]byte) ([]byte, error) {
			return []byte("y"), nil
		}, nil)
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("UpdateWith of a FIFO that looked like a file: %v, want ErrNotRegular", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("UpdateWith of a FIFO that looked like a file is still reading it")
	}
	if err := AppendTo(fsys, fifo, false, []byte("x"), nil); !errors.Is(err, ErrNotRegular) {
		t.Errorf("AppendTo a FIFO that looked like a file: %v, want ErrNotRegular", err)
	}
	if tmp := tempFiles(t, fifo); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}
}

// swapFS answers Lstat of one path with the stat of another file: as if
// the file had been replaced by a symlink after Resolve looked at it.
type swapFS struct {
	OS
	path string
	as   fs.FileInfo
}

func (s swapFS) Lstat(name string) (fs.FileInfo, error) {
	if name == s.path {
		return s.as, nil
	}
	return s.OS.Lstat(name)
}

// A symlink that replaced the resolved file before it was opened is not
// followed: the open refuses it (O_NOFOLLOW), for an update and an append.
func TestOpenDoesNotFollowLateSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	writeFile(t, victim, "precious\n", 0o644)
	plain := filepath.Join(dir, "plain")
	writeFile(t, plain, "x", 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(victim, link)
	fi, _ := os.Lstat(plain)
	fsys := swapFS{path: link, as: fi}
	before := snap(t, victim)
	err := UpdateWith(fsys, link, Options{}, func([]byte) ([]byte, error) {
		t.Error("fn called through a late symlink")
		return []byte("x"), nil
	}, nil)
	if !errors.Is(err, syscall.ELOOP) {
		t.Errorf("update through a late symlink: %v, want ELOOP", err)
	}
	if err := AppendTo(fsys, link, false, []byte("appended\n"), nil); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("append through a late symlink: %v, want ELOOP", err)
	}
	before.unchanged(t)
}

// fakeInfo is a stat result with the owner a test chooses.
type fakeInfo struct {
	mode     fs.FileMode
	uid, gid int
}

func (f fakeInfo) Name() string       { return "x" }
func (f fakeInfo) Size() int64        { return 0 }
func (f fakeInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeInfo) ModTime() time.Time { return time.Time{} }
func (f fakeInfo) IsDir() bool        { return f.mode.IsDir() }
func (f fakeInfo) Sys() any {
	st := &syscall.Stat_t{}
	st.Uid, st.Gid = uint32(f.uid), uint32(f.gid)
	return st
}

// dirFS answers Stat with dir for every name.
type dirFS struct {
	OS
	dir fs.FileInfo
}

func (d dirFS) Stat(string) (fs.FileInfo, error) { return d.dir, nil }

// The fs.protected_symlinks rule, for every combination that matters: in
// a sticky world-writable directory a link is followed only for its owner
// or the directory's; elsewhere always.
func TestMayFollowRule(t *testing.T) {
	self := os.Geteuid()
	other, owner := self+1000, self+2000
	sticky := fs.ModeDir | fs.ModeSticky | 0o777
	cases := []struct {
		name            string
		dir             fs.FileMode
		linkUID, dirUID int
		follow          bool
	}{
		{"another user's link in /tmp", sticky, other, owner, false},
		{"own link in /tmp", sticky, self, owner, true},
		{"the directory owner's link", sticky, owner, owner, true},
		{"another user's link, directory not sticky", fs.ModeDir | 0o777, other, owner, true},
		{"another user's link, directory not world-writable", fs.ModeDir | fs.ModeSticky | 0o775, other, owner, true},
	}
	for _, c := range cases {
		fsys := dirFS{dir: fakeInfo{mode: c.dir, uid: c.dirUID}}
		err := mayFollow(fsys, "/d/link", fakeInfo{mode: fs.ModeSymlink | 0o777, uid: c.linkUID})
		if c.follow {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		var se *SymlinkError
		if !errors.As(err, &se) {
			t.Errorf("%s: %v, want a *SymlinkError", c.name, err)
			continue
		}
		if se.Link != "/d/link" || se.Dir != "/d" || se.LinkUID != c.linkUID || se.DirUID != c.dirUID || se.UID != self {
			t.Errorf("%s: %+v does not say whose link in whose directory", c.name, se)
		}
	}
}

// A link that someone else planted in a sticky world-writable directory
// must not lead an update or an append to its target; the kernel's
// fs.protected_symlinks would refuse `echo >> link` the same way. Where
// the kernel would follow the link, so does an update.
func TestResolveRefusesPlantedSymlink(t *testing.T) {
	testenv.NeedRoot(t, "giving a symlink another owner (chown -h)")
	dir := t.TempDir()
	tmp := testenv.StickyDir(t, dir)
	target := filepath.Join(dir, "secret")
	writeFile(t, target, "root's secret\n", 0o644)
	before := snap(t, target)
	link := filepath.Join(tmp, "report")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	testenv.Lchown(t, link, testenv.Someone, testenv.Someone)

	_, err := Resolve(OS{}, link)
	var se *SymlinkError
	if !errors.As(err, &se) || se.Link != link || se.Dir != tmp || se.LinkUID != testenv.Someone || se.UID != 0 {
		t.Fatalf("Resolve of a planted link: %v, want a *SymlinkError naming it", err)
	}
	if !errors.Is(err, ErrProtectedSymlink) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("%v does not match ErrProtectedSymlink and fs.ErrPermission", err)
	}
	if _, err := Locate(OS{}, link); !errors.Is(err, ErrProtectedSymlink) {
		t.Errorf("Locate of a planted link: %v", err)
	}
	err = UpdateWith(OS{}, link, Options{}, func([]byte) ([]byte, error) {
		t.Error("fn called through a planted link")
		return []byte("overwritten\n"), nil
	}, nil)
	if !errors.Is(err, ErrProtectedSymlink) {
		t.Errorf("UpdateWith through a planted link: %v", err)
	}
	if err := AppendTo(OS{}, link, false, []byte("appended\n"), nil); !errors.Is(err, ErrProtectedSymlink) {
		t.Errorf("AppendTo through a planted link: %v", err)
	}
	before.unchanged(t)

	// A chain whose first link is fine but leads through the planted one.
	mine := filepath.Join(dir, "mine")
	os.Symlink(link, mine)
	if err := UpdateWith(OS{}, mine, Options{}, setTo("overwritten\n"), nil); !errors.Is(err, ErrProtectedSymlink) {
		t.Errorf("UpdateWith through a chain: %v", err)
	}
	before.unchanged(t)

	allowed := []struct {
		name  string
		setup func()
	}{
		{"link owned by the caller", func() { testenv.Lchown(t, link, 0, 0) }},
		{"link owned by the directory's owner", func() {
			testenv.Lchown(t, link, testenv.Someone, testenv.Someone)
			testenv.Lchown(t, tmp, testenv.Someone, testenv.Someone)
		}},
		{"directory not sticky", func() {
			testenv.Lchown(t, tmp, 0, 0)
			os.Chmod(tmp, 0o777)
		}},
		{"directory not world-writable", func() { os.Chmod(tmp, 0o775|fs.ModeSticky) }},
	}
	for i, c := range allowed {
		c.setup()
		want := fmt.Sprintf("update %d\n", i)
		if err := UpdateWith(OS{}, link, Options{}, setTo(want), nil); err != nil {
			t.Errorf("%s: %v", c.name, err)
		} else if s := readFile(t, target); s != want {
			t.Errorf("%s: target %q, want %q", c.name, s, want)
		}
	}
}
