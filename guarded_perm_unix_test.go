//go:build unix

package hold

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
)

// Permission checks are real only for an unprivileged user: root writes
// anything. When the tests run as root (as CI does), the worker is run as
// user nobody, from a copy of the test binary that nobody may execute.

const nobody = 65534

// permWorker returns a directory that the worker's user may enter, and
// the command to start a guarded-update-once worker as that user.
func permWorker(t *testing.T) (dir string, run func(env ...string) (int, string)) {
	t.Helper()
	return permWorkerAs(t, &syscall.Credential{Uid: nobody, Gid: nobody})
}

// permWorkerAs is permWorker with the worker's user, group and
// supplementary groups given (they apply only when running as root).
func permWorkerAs(t *testing.T, cred *syscall.Credential) (dir string, run func(env ...string) (int, string)) {
	t.Helper()
	root := os.Geteuid() == 0
	dir = testenv.PublicDir(t, "hold-perm-")
	bin := os.Args[0]
	if root {
		bin = filepath.Join(dir, "hold.test")
		copyExecutable(t, os.Args[0], bin)
	}
	return dir, func(env ...string) (int, string) {
		cmd := exec.Command(bin, "-test.run=^$")
		cmd.Env = append(append(os.Environ(), WorkerEnv+"=guarded-update-once"), env...)
		cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
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

func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
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

// chownToWorker gives path to the worker's user when running as root.
func chownToWorker(t *testing.T, path string) {
	if os.Geteuid() == 0 {
		if err := os.Chown(path, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
}

// A directory the user may not write: the file inside is theirs and
// writable, but no temp file can be made beside it, so Update must fail
// cleanly; Append, which needs no new name, still works.
func TestUpdateReadOnlyDirectory(t *testing.T) {
	base, run := permWorker(t)
	dir := filepath.Join(base, "ro")
	os.Mkdir(dir, 0o755)
	path := filepath.Join(dir, "f")
	writeFile(t, path, "original\n", 0o644)
	chownToWorker(t, path)
	if os.Geteuid() != 0 {
		os.Chmod(dir, 0o555)
	}
	lock := filepath.Join(base, "f.lock")
	writeFile(t, lock, "", 0o666)

	code, out := run("GUARDED_FILE="+path, "GUARDED_LOCK="+lock)
	if code != 0 {
		t.Fatalf("update in a read-only directory: exit %d, want a permission error; output: %s", code, out)
	}
	if !strings.Contains(out, "update "+path) || !strings.Contains(out, "permission denied") {
		t.Errorf("unclear error: %s", out)
	}
	if s := readFile(t, path); s != "original\n" {
		t.Errorf("original changed to %q", s)
	}
	if tmp := tempFiles(t, path); len(tmp) > 0 {
		t.Errorf("temp files left: %v", tmp)
	}

	code, out = run("GUARDED_FILE="+path, "GUARDED_LOCK="+lock, "GUARDED_OP=append")
	if code != 1 {
		t.Errorf("append to a writable file in a read-only directory: exit %d: %s", code, out)
	}
}

// A file the user may not write, in a directory they may write: renaming
// over it would succeed, but Update must refuse as a write would.
func TestUpdateFileWithoutWritePermission(t *testing.T) {
	base, run := permWorker(t)
	dir := filepath.Join(base, "rw")
	os.Mkdir(dir, 0o777)
	os.Chmod(dir, 0o777)
	path := filepath.Join(dir, "f")
	writeFile(t, path, "original\n", 0o644)
	if os.Geteuid() != 0 {
		os.Chmod(path, 0o444)
	}
	lock := filepath.Join(base, "f.lock")
	writeFile(t, lock, "", 0o666)
	for _, op := range []string{"update", "append"} {
		code, out := run("GUARDED_FILE="+path, "GUARDED_LOCK="+lock, "GUARDED_OP="+op)
		if code != 0 {
			t.Errorf("%s of a file without write permission: exit %d, want a permission error; output: %s", op, code, out)
		}
		if s := readFile(t, path); s != "original\n" {
			t.Fatalf("%s changed the file to %q", op, s)
		}
	}
}
