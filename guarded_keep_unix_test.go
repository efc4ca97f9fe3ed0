//go:build unix

package hold

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
)

// Tests that an update keeps everything the file is, or refuses: links
// it may not follow, hard links it would split, owners it cannot keep,
// and that it never reports failure once the new content is in place.

// A link that someone else planted in a sticky world-writable directory
// must not lead an update or an append to its target, and no lock file is
// made beside it. (Which links are followed is atomicfile's rule, tested
// there: TestResolveRefusesPlantedSymlink.)
func TestGuardedRefusesPlantedSymlink(t *testing.T) {
	testenv.NeedRoot(t, "giving a symlink another owner (chown -h)")
	dir := t.TempDir()
	tmp := testenv.StickyDir(t, dir)
	target := filepath.Join(dir, "secret")
	const original = "root's secret\n"
	writeFile(t, target, original, 0o644)
	link := filepath.Join(tmp, "report")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	testenv.Lchown(t, link, testenv.Someone, testenv.Someone)

	err := Update(context.Background(), link, func([]byte) ([]byte, error) {
		t.Error("fn called through a planted link")
		return []byte("overwritten\n"), nil
	})
	checkHoldError(t, err, "update", ErrProtectedSymlink)
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("%v does not match fs.ErrPermission", err)
	}
	for _, want := range []string{"uid 4242", tmp, "uid 0", "sticky world-writable", "protected_symlinks"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	err = Append(context.Background(), link, []byte("appended\n"))
	checkHoldError(t, err, "append", ErrProtectedSymlink)
	if s := readFile(t, target); s != original {
		t.Fatalf("the link's target changed to %q", s)
	}
	if _, err := os.Lstat(link + ".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a lock file was made beside the refused link: %v", err)
	}
}

// An update of a file with other names would leave them the old content:
// it is refused, unless AllowSplit. Append writes in place and is fine.
func TestUpdateRefusesHardLinkedFile(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	writeFile(t, a, "shared\n", 0o644)
	if err := os.Link(a, b); err != nil {
		t.Fatal(err)
	}
	err := Update(context.Background(), a, func([]byte) ([]byte, error) {
		t.Error("fn called for a hard-linked file")
		return []byte("split\n"), nil
	})
	checkHoldError(t, err, "update", ErrHardLinked)
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "2 hard links") || !strings.Contains(err.Error(), "--allow-split") {
		t.Errorf("unclear error: %v", err)
	}
	if tmp := tempFiles(t, a); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}
	if err := Append(context.Background(), a, []byte("appended\n")); err != nil {
		t.Fatal(err)
	}
	if s := readFile(t, b); s != "shared\nappended\n" {
		t.Errorf("the other name reads %q after an append", s)
	}

	if err := Update(context.Background(), a, setTo("split\n"), AllowSplit()); err != nil {
		t.Fatal(err)
	}
	if sa, sb := readFile(t, a), readFile(t, b); sa != "split\n" || sb != "shared\nappended\n" {
		t.Errorf("after AllowSplit: a %q, b %q", sa, sb)
	}
}

func ownerOfFile(t *testing.T, path string) (uid, gid int) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid)
}

// A group member updating a group-shared file cannot make the new file
// the owner's: the update is refused before fn runs, unless
// AllowOwnerChange, which keeps the group. (The rest of the ownership
// rule is atomicfile's, tested there: TestUpdateOwnershipWithoutPrivilege.)
func TestUpdateOwnershipWithoutPrivilege(t *testing.T) {
	testenv.NeedRoot(t, "files of several users, and a worker running as one of them")
	base, run := permWorkerAs(t, &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{testenv.SomeGroup}})
	dir := filepath.Join(base, "shared")
	os.Mkdir(dir, 0o775)
	testenv.Lchown(t, dir, 0, testenv.SomeGroup)
	os.Chmod(dir, 0o775)
	lock := filepath.Join(base, "f.lock")
	writeFile(t, lock, "", 0o666)
	path := filepath.Join(dir, "tracker")

	cases := []struct {
		name       string
		uid, gid   int
		opts       string
		code       int // the worker's: 0 refused, 1 done
		want       []string
		wantOwner  [2]int
		wantChange bool
	}{
		{"testenv.Someone else's file", testenv.Someone, testenv.SomeGroup, "", 0,
			[]string{"uid 4242", "gid 4343", "--allow-owner-change"}, [2]int{testenv.Someone, testenv.SomeGroup}, false},
		{"testenv.Someone else's file, owner change allowed", testenv.Someone, testenv.SomeGroup, "owner", 1,
			nil, [2]int{nobody, testenv.SomeGroup}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(path)
			writeFile(t, path, "original\n", 0o664)
			testenv.Lchown(t, path, c.uid, c.gid)
			before, _ := os.Stat(path)
			code, out := run("GUARDED_FILE="+path, "GUARDED_LOCK="+lock, "GUARDED_OPTS="+c.opts)
			if code != c.code {
				t.Fatalf("worker exit %d, want %d; output: %s", code, c.code, out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("error does not say %q: %s", w, out)
				}
			}
			if uid, gid := ownerOfFile(t, path); uid != c.wantOwner[0] || gid != c.wantOwner[1] {
				t.Errorf("file owned by %d:%d, want %d:%d", uid, gid, c.wantOwner[0], c.wantOwner[1])
			}
			after, _ := os.Stat(path)
			if c.wantChange {
				if s := readFile(t, path); s != "replaced\n" {
					t.Errorf("content %q", s)
				}
				return
			}
			if s := readFile(t, path); s != "original\n" || !os.SameFile(before, after) {
				t.Errorf("refused update changed the file: %q, same inode %v", s, os.SameFile(before, after))
			}
			if tmp := tempFiles(t, path); len(tmp) > 0 {
				t.Errorf("temp files left: %v", tmp)
			}
		})
	}
}

// A directory sync that fails after the rename is a warning, not an
// error: the new content is in place.
func TestUpdateDirSyncFailureIsWarning(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "original\n", 0o644)
	var log bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	err := update(context.Background(), &faultFS{syncDirErr: syscall.EIO}, path, setTo("new\n"), []Option{Logger(logger)})
	if err != nil {
		t.Fatalf("an update whose rename succeeded returned %v", err)
	}
	if s := readFile(t, path); s != "new\n" {
		t.Errorf("content %q", s)
	}
	if !strings.Contains(log.String(), "level=WARN") || !strings.Contains(log.String(), "may not survive a crash") {
		t.Errorf("no warning logged: %q", log.String())
	}
}
