package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/testenv"
)

// TestRunPortableHeartbeatLostStopsFirst: a portable lock held from
// "another host" (a UTS namespace) through one mount of a shared
// directory, whose heartbeat stops because that mount dies (its FUSE
// daemon killed) or hangs (stopped: every call on it blocks, the
// heartbeat's too), while a waiter on this host, through the other mount,
// judges it by the heartbeat's age. The holder must call the lock lost
// early enough to stop its whole command (one that ignores SIGTERM, with
// a grandchild writer) before the waiter can take the lock: every write
// of the old command comes before the new holder's first, and none of the
// old command's processes is left.
func TestRunPortableHeartbeatLostStopsFirst(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"dies", "hangs"} {
		t.Run("mount "+how, func(t *testing.T) {
			t.Parallel()
			heartbeatLost(t, how == "hangs")
		})
	}
}

func heartbeatLost(t *testing.T, hang bool) {
	d := mountTwice(t)
	unshare := testenv.LookPath(t, "unshare", "not installed (apt package util-linux)")
	if os.Geteuid() != 0 {
		t.Skip("a UTS namespace needs root (CI runs as root)")
	}
	logDir := t.TempDir()
	logPath := filepath.Join(logDir, "log")
	script := fmt.Sprintf(`trap '' TERM; touch %s/ready; sh -c 'while :; do echo "old $(date +%%s%%N)" >> %s; sleep 0.02; done'; echo done`, logDir, logPath)
	marker := fmt.Sprintf("heartbeat-%d-%d", os.Getpid(), time.Now().UnixNano())
	holder, herr := startMarkedCmd(t, marker, d.b, sharedFSTimings, unshare, "-u", "sh", "-c",
		`hostname other-host && exec "$0" run --protocol dir --kill-after 0.5 t -c "$1"`, holdBin, script)
	waitFor(t, filepath.Join(logDir, "ready"))

	// The holder's mount dies or hangs: its heartbeats fail from now on.
	daemon := fuseDaemonOf(t, d.b)
	sig := syscall.SIGKILL
	if hang {
		sig = syscall.SIGSTOP
		t.Cleanup(func() { syscall.Kill(daemon, syscall.SIGCONT) })
	}
	if err := syscall.Kill(daemon, sig); err != nil {
		t.Fatal(err)
	}
	w := holdEnv(t, d.a, sharedFSTimings, "run", "--protocol", "dir", "--kill-after", "0.5", "-w", "20", "t",
		"-c", `echo "new $(date +%s%N)" >> `+logPath)
	if w.code != 0 {
		t.Fatalf("waiter: exit %d: %s", w.code, w.stderr)
	}
	if hang {
		// hold itself cannot finish (its release waits for the hung
		// mount), but its command must be gone: look for it from the
		// outside, then let the mount go on.
		if pids := markedAlive(marker); len(pids) > 1 || len(pids) == 1 && pids[0] != holder.Process.Pid {
			t.Errorf("processes of the old command still alive: %v (hold is %d)", pids, holder.Process.Pid)
		}
		syscall.Kill(daemon, syscall.SIGCONT)
	}
	code := waitExit(t, holder)
	if code != exitLockError {
		t.Errorf("holder: exit %d, want %d (lost): %s", code, exitLockError, herr.String())
	}
	if msg := herr.String(); !strings.Contains(msg, "heartbeat") || !strings.Contains(msg, "SIGKILL") {
		t.Errorf("holder's stderr does not say the heartbeat failed and the command was killed: %q", msg)
	}
	if pids := markedAlive(marker); len(pids) > 0 {
		t.Errorf("processes of the old command still alive: %v", pids)
	}
	var lastOld, firstNew int64
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, logPath)), "\n") {
		who, ts, _ := strings.Cut(line, " ")
		n, err := strconv.ParseInt(ts, 10, 64)
		if err != nil {
			t.Fatalf("log line %q", line)
		}
		switch {
		case who == "old":
			lastOld = max(lastOld, n)
		case who == "new" && firstNew == 0:
			firstNew = n
		}
	}
	if lastOld == 0 || firstNew == 0 {
		t.Fatalf("log lacks the old or the new holder's writes:\n%s", readFile(t, logPath))
	}
	if lastOld >= firstNew {
		t.Errorf("the old command wrote %v after the new holder's first write", time.Duration(lastOld-firstNew))
	}
	t.Logf("old command's last write %v before the new holder's first", time.Duration(firstNew-lastOld).Round(time.Millisecond))
}

// startMarkedCmd starts argv in dir, with env and marker in its
// environment, so that the test can find any process it starts later (see
// markedAlive); whatever is left of them is killed when the test ends.
func startMarkedCmd(t *testing.T, marker, dir string, env []string, argv ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), "HOLD_TEST_STOP="+marker)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range markedAlive(marker) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	killAtCleanup(t, cmd) // runs first: the command, then what is left of it
	return cmd, &errb
}

// fuseDaemonOf finds the bindfs process serving the mount at dir.
func fuseDaemonOf(t *testing.T, dir string) int {
	t.Helper()
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) >= 3 && filepath.Base(args[0]) == "bindfs" && args[len(args)-1] == dir {
			return pid
		}
	}
	t.Fatalf("no bindfs process serves %s", dir)
	return 0
}
