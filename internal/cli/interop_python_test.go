//go:build unix

package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
)

// pythonWithFilelock returns a Python interpreter that can import
// filelock (py-filelock, Debian's python3-filelock), or "" if there is none.
// Debian's own interpreter is tried first, since that is where the Debian
// package installs the module.
func pythonWithFilelock() string {
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		path, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import filelock").Run() == nil {
			return path
		}
	}
	return ""
}

// Python's filelock (UnixFileLock) takes flock(2) on the path it is given,
// so it and hold exclude each other on TARGET.lock in both directions.
func TestPythonFilelockInterop(t *testing.T) {
	t.Parallel()
	py := pythonWithFilelock()
	if py == "" {
		testenv.MissingTool(t, "python3-filelock", "no python3 with the filelock module (Debian package python3-filelock)")
	}
	dir := t.TempDir()

	// try.py exits 0 if it got the lock at once, 1 if it timed out.
	try := `import sys, filelock
l = filelock.FileLock("T.lock", timeout=0)
try:
    l.acquire()
except filelock.Timeout:
    sys.exit(1)
l.release()
`
	// hold holds T: filelock on T.lock times out.
	holder, _ := holdCommand(t, dir)
	c := exec.Command(py, "-c", try)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if c.ProcessState == nil || c.ProcessState.ExitCode() != 1 {
		t.Errorf("filelock on T.lock while hold holds T: %v %s, want a timeout (exit 1)", err, out)
	}
	os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
	waitExit(t, holder)

	// Once hold is done, filelock gets it at once.
	c = exec.Command(py, "-c", try)
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		t.Errorf("filelock on T.lock after hold released it: %v %s, want success", err, out)
	}

	// filelock holds T.lock: hold run -n T is busy.
	hold := `import filelock, os, time
with filelock.FileLock("T.lock"):
    open("ready", "w").write(str(os.getpid()))
    for _ in range(3000):
        if os.path.exists("go"):
            break
        time.sleep(0.02)
`
	os.Remove(filepath.Join(dir, "ready"))
	os.Remove(filepath.Join(dir, "go"))
	p := exec.Command(py, "-c", hold)
	p.Dir = dir
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		os.WriteFile(filepath.Join(dir, "go"), nil, 0o644)
		p.Wait()
	}()
	waitFor(t, filepath.Join(dir, "ready"))
	r := runHold(t, dir, "run", "-n", "T", "--", "true")
	if r.code != 1 {
		t.Errorf("hold run -n T while filelock holds T.lock: exit %d (%s), want 1", r.code, r.stderr)
	}
	if isLinux() && !strings.Contains(r.stderr, fmt.Sprintf("pid %d", p.Process.Pid)) {
		t.Logf("the busy message does not name the Python holder, pid %d: %s", p.Process.Pid, r.stderr)
	}
}
