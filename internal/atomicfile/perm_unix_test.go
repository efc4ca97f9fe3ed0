//go:build unix

package atomicfile

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
)

// Permission checks are real only for an unprivileged user: root writes
// anything. When the tests run as root (as CI does), the worker (see
// main_test.go) runs as user nobody, from a copy of the test binary that
// nobody may execute.

const nobody = testenv.Nobody

// runAs returns a directory that the worker's user may enter, and the
// command that runs one worker as that user, given its user, group and
// supplementary groups (they apply only when running as root). run
// returns the worker's exit status (0 refused for permission, 1 done, 2
// another error) and its output.
func runAs(t *testing.T, cred *syscall.Credential) (dir string, run func(op, path string, opts ...string) (int, string)) {
	t.Helper()
	root := os.Geteuid() == 0
	dir = testenv.PublicDir(t, "hold-atomicfile-")
	bin := os.Args[0]
	if root {
		bin = testenv.ExecutableCopy(t, dir)
	}
	return dir, func(op, path string, opts ...string) (int, string) {
		t.Helper()
		cmd := testenv.Command(envWorker+"="+op, envFile+"="+path, envOpts+"="+strings.Join(opts, " "))
		cmd.Path, cmd.Args[0] = bin, bin
		if root {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, strings.TrimSpace(string(out))
	}
}

func asNobody(t *testing.T) (string, func(op, path string, opts ...string) (int, string)) {
	t.Helper()
	return runAs(t, &syscall.Credential{Uid: nobody, Gid: nobody})
}

// chownToWorker gives path to the worker's user when running as root.
func chownToWorker(t *testing.T, path string) {
	t.Helper()
	if os.Geteuid() == 0 {
		if err := os.Chown(path, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
}

// A directory the user may not write: the file inside is theirs and
// writable, but no temp file can be made beside it, so an update fails
// cleanly; an append, which needs no new name, still works.
func TestUpdateReadOnlyDirectory(t *testing.T) {
	base, run := asNobody(t)
	dir := filepath.Join(base, "ro")
	os.Mkdir(dir, 0o755)
	path := filepath.Join(dir, "f")
	writeFile(t, path, "original\n", 0o644)
	chownToWorker(t, path)
	if os.Geteuid() != 0 {
		os.Chmod(dir, 0o555)
	}
	before := snap(t, path)
	code, out := run("update", path)
	if code != 0 || !strings.Contains(out, "permission denied") || !strings.Contains(out, "hint: the file and its directory must be writable") {
		t.Fatalf("update in a read-only directory: exit %d, want a permission error with its hint; output: %s", code, out)
	}
	before.unchanged(t)

	if code, out := run("append", path); code != 1 {
		t.Errorf("append to a writable file in a read-only directory: exit %d: %s", code, out)
	}
	if s := readFile(t, path); s != "original\nappended\n" {
		t.Errorf("content after the append %q", s)
	}
}

// A file the user may not write, in a directory they may write: renaming
// over it would succeed, but an update refuses as a write would.
func TestUpdateFileWithoutWritePermission(t *testing.T) {
	base, run := asNobody(t)
	dir := filepath.Join(base, "rw")
	os.Mkdir(dir, 0o777)
	os.Chmod(dir, 0o777)
	path := filepath.Join(dir, "f")
	writeFile(t, path, "original\n", 0o644) // root's, or 0444 below
	if os.Geteuid() != 0 {
		os.Chmod(path, 0o444)
	}
	// The worker's own file, whose bits let its group write but not its
	// owner: only the kernel's answer (access(2)) tells.
	own := filepath.Join(dir, "own")
	writeFile(t, own, "original\n", 0o420)
	chownToWorker(t, own)
	for _, p := range []string{path, own} {
		before := snap(t, p)
		for _, op := range []string{"update", "append"} {
			code, out := run(op, p)
			if code != 0 || strings.Contains(out, "fn called") {
				t.Errorf("%s of %s without write permission: exit %d, want a permission error before fn; output: %s", op, filepath.Base(p), code, out)
			}
			before.unchanged(t)
		}
	}
}

// In a directory the user may write but not read, the rename succeeds but
// the directory cannot be opened to be synced. The update is done: it is
// reported as done (the file system is synced instead), never as "left
// unchanged", which would make a retry apply it twice.
func TestUpdateInUnreadableDirectory(t *testing.T) {
	base, run := asNobody(t)
	dir := filepath.Join(base, "wx")
	os.Mkdir(dir, 0o755)
	path := filepath.Join(dir, "f")
	writeFile(t, path, "original\n", 0o644)
	chownToWorker(t, path)
	chownToWorker(t, dir)
	os.Chmod(dir, 0o333)

	code, out := run("update", path)
	if code != 1 || strings.Contains(out, "warning") {
		t.Errorf("update in a write-only directory: worker exit %d, want 1 (done) with no warning; output: %s", code, out)
	}
	if s := readFile(t, path); s != "replaced\n" {
		t.Errorf("content %q, want the update", s)
	}
}

// A group member updating a group-shared file cannot make the new file
// the owner's: the update is refused before fn runs, unless
// AllowOwnerChange, which keeps the group. The owner itself keeps the
// group, and cannot give the file a group it is not in.
func TestUpdateOwnershipWithoutPrivilege(t *testing.T) {
	testenv.NeedRoot(t, "files of several users, and a worker running as one of them")
	base, run := runAs(t, &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{testenv.SomeGroup}})
	dir := filepath.Join(base, "shared")
	os.Mkdir(dir, 0o775)
	testenv.Lchown(t, dir, 0, testenv.SomeGroup)
	os.Chmod(dir, 0o775)
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
			[]string{"uid 4242", "gid 4343", "only root may give a file to another user", "--allow-owner-change"}, [2]int{testenv.Someone, testenv.SomeGroup}, false},
		{"testenv.Someone else's file, owner change allowed", testenv.Someone, testenv.SomeGroup, "owner", 1,
			[]string{"warning: " + path + " now belongs to uid 65534", "gid 4343"}, [2]int{nobody, testenv.SomeGroup}, true},
		{"own file, a group of ours", nobody, testenv.SomeGroup, "", 1,
			nil, [2]int{nobody, testenv.SomeGroup}, true},
		{"own file, a group not ours", nobody, testenv.Someone, "", 0,
			[]string{"gid 4242", "is not a member of it", "a member of gid 4242"}, [2]int{nobody, testenv.Someone}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(path)
			writeFile(t, path, "original\n", 0o664)
			testenv.Lchown(t, path, c.uid, c.gid)
			before := snap(t, path)
			code, out := run("update", path, c.opts)
			if code != c.code {
				t.Fatalf("worker exit %d, want %d; output: %s", code, c.code, out)
			}
			if refused := c.code == 0; refused && strings.Contains(out, "fn called") {
				t.Errorf("fn ran for an update that is refused: %s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not say %q: %s", w, out)
				}
			}
			if uid, gid := ownerOfFile(t, path); uid != c.wantOwner[0] || gid != c.wantOwner[1] {
				t.Errorf("file owned by %d:%d, want %d:%d", uid, gid, c.wantOwner[0], c.wantOwner[1])
			}
			if c.wantChange {
				if s := readFile(t, path); s != "replaced\n" {
					t.Errorf("content %q", s)
				}
				return
			}
			before.unchanged(t)
		})
	}
}
