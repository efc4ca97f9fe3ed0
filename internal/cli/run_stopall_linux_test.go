package cli

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hold-dev/hold/internal/faultnet"
	"github.com/hold-dev/hold/internal/testenv"
)

// recordSelf is shell that appends the shell's own pid, as this pid
// namespace numbers it, to ./pids: read is a builtin, so /proc/self is the
// shell itself (also in a subshell, and inside `unshare -p`, whose /proc
// is still the outer one).
const recordSelf = `read -r me rest < /proc/self/stat; echo $me >> pids; `

// tickLog is shell that writes a timestamp to ./log every 50ms, forever.
const tickLog = `while :; do date +%s%N >> log; sleep 0.05; done`

// foreground keeps the command's first process running until it is
// stopped, after saying that the command runs.
const foreground = `touch ready; while :; do sleep 0.05; done`

// stopAllCases are the process patterns that must not outlive hold run.
// Each records the pid of every shell it starts in ./pids and writes
// timestamps to ./log; files holds the scripts it runs by name. The
// command's first process runs until it is stopped, so that the command
// never ends by itself (a command that does leaves its background
// processes alone).
var stopAllCases = []struct {
	name    string
	files   map[string]string
	command []string // after `hold run ... T`
	needs   string   // a tool the case cannot run without
	// trapsTerm: the command's first process exits 0 on SIGTERM,
	// rather than dying of it (143).
	trapsTerm bool
}{
	{
		// A process that forks a copy of itself and exits, as fast as
		// it can, ignoring SIGTERM: its pid changes every few
		// milliseconds, and a single look at the process table misses
		// it now and then.
		name:    "fork chain",
		files:   map[string]string{"hop": `trap '' TERM; ` + recordSelf + `date +%s%N >> log; sh ./hop &`},
		command: []string{"-c", recordSelf + `sh ./hop & ` + foreground},
	},
	{
		// A supervisor whose SIGTERM handler starts a replacement and
		// exits; the replacement never sees that SIGTERM.
		name:    "respawning supervisor",
		files:   map[string]string{"sup": recordSelf + `trap '(sh ./sup &); exit 0' TERM; touch ready; ` + tickLog},
		command: []string{"--", "sh", "./sup"},
		// hold's SIGTERM may reach a replacement too, before it
		// traps it: then nothing is left to kill, and hold exits with
		// the first supervisor's status.
		trapsTerm: true,
	},
	{
		name:    "setsid daemon",
		command: []string{"-c", recordSelf + `setsid sh -c '` + recordSelf + tickLog + `' & ` + foreground},
		needs:   "setsid",
	},
	{
		name:    "nohup",
		command: []string{"-c", recordSelf + `nohup sh -c '` + recordSelf + tickLog + `' >/dev/null 2>&1 & ` + foreground},
	},
	{
		// The writer is the first process of a pid namespace of its
		// own, which ignores SIGTERM (a namespace's init ignores the
		// signals it does not catch) and is re-parented to hold once
		// unshare is gone.
		name:    "unshare -p -f",
		command: []string{"-c", recordSelf + `unshare -p -f sh -c '` + recordSelf + tickLog + `' & ` + foreground},
		needs:   "unshare",
	},
	{
		// The shell's child ignores SIGTERM; the shell obeys it.
		name:    "SIGTERM-ignoring grandchild",
		command: []string{"-c", recordSelf + `sh -c "trap '' TERM; touch ready; ` + recordSelf + tickLog + `"; echo done`},
	},
}

// stopAllKillAfter is the trials' --kill-after: short, so that a trial
// takes a second or two, and long enough that SIGTERM has time to work.
const stopAllKillAfter = "0.5"

// stopAllTTL is the etcd trials' lease (seconds): hold is told of a loss
// some 3.5s before the lease may expire (StopWithin, kill-after + 0.5s,
// and the protocol's margin), so that 8 leaves several seconds for a
// keep-alive to be answered on a loaded machine.
const stopAllTTL = "8"

// TestRunStopsEveryProcess: for each process pattern of stopAllCases and
// each way a running `hold run` is made to stop its command (SIGTERM to
// hold, its kernel lock file removed, its portable lock broken, its etcd
// lease lost), no process of the command is alive when hold exits, and no
// second holder runs while any of them does: the second holder's first
// write to the shared log comes after the old command's last. The second
// holder starts right after the trigger where hold still holds the lock
// (SIGTERM; the etcd lease, which hold is told about early enough to stop
// everything before it expires), and right after hold exits where the
// lock was gone at the trigger itself (a removed file, a broken portable
// lock: docs/cli.md says newcomers get in then). HOLD_TEST_TRIALS sets the
// trials of each pair (1 by default).
func TestRunStopsEveryProcess(t *testing.T) {
	t.Parallel()
	n := trialCount(t)
	for _, trig := range stopTriggers {
		t.Run(trig.name, func(t *testing.T) {
			t.Parallel()
			var etcdAddr string
			if trig.etcd {
				if testing.Short() {
					t.Skip("runs an etcd server")
				}
				etcdAddr = startEtcd(t)
			}
			// The cases run side by side, whatever -parallel says: a
			// trial mostly waits (for a grace period, a lease), so that
			// one at a time would make the test long for nothing.
			var wg sync.WaitGroup
			for _, c := range stopAllCases {
				wg.Go(func() {
					t.Run(c.name, func(t *testing.T) {
						if c.needs != "" {
							needTool(t, c.needs)
						}
						for i := range n {
							for again := 0; !stopAllTrial(t, i, trig, c.files, c.command, c.trapsTerm, etcdAddr); again++ {
								if again == earlyLossRetries {
									t.Fatalf("trial %d: the lease was lost before the trigger %d times in a row", i, again+1)
								}
							}
						}
					})
				})
			}
			wg.Wait()
		})
	}
}

// needTool ends t unless tool is installed and works here (unshare -p
// needs the right to make a pid namespace).
func needTool(t *testing.T, tool string) {
	testenv.LookPath(t, tool, "not installed (apt package util-linux)")
	if tool == "unshare" {
		if out, err := exec.Command("unshare", "-p", "-f", "true").CombinedOutput(); err != nil {
			testenv.MissingTool(t, "unshare -p", fmt.Sprintf("cannot make a pid namespace here: %v: %s", err, bytes.TrimSpace(out)))
		}
	}
}

// A trigger makes a running `hold run` stop its command.
type stopTrigger struct {
	name string
	// args go before TARGET; target is TARGET (etcd: the server's
	// address is put in).
	args []string
	// fire makes hold stop. dir is the trial's directory, hold the
	// hold process.
	fire func(t *testing.T, dir string, hold *exec.Cmd, px *faultnet.Proxy)
	// code is hold's exit status (0: 137 if hold had to SIGKILL some of
	// the command, else the command's own, see termExit).
	code int
	// keeps: hold keeps the lock after the trigger, so that a second
	// holder started right then must wait for all of the command.
	keeps bool
	// second is the flags of the second holder.
	second []string
	// etcd: the lock is an etcd lock, reached through a proxy that the
	// trigger cuts.
	etcd bool
}

var stopTriggers = []stopTrigger{
	{
		name: "SIGTERM to hold",
		fire: func(t *testing.T, _ string, hold *exec.Cmd, _ *faultnet.Proxy) {
			if err := hold.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		},
		keeps:  true,
		second: []string{"-w", "60"},
	},
	{
		name: "lost kernel lock",
		fire: func(t *testing.T, dir string, _ *exec.Cmd, _ *faultnet.Proxy) {
			if err := os.Remove(filepath.Join(dir, "T.lock")); err != nil {
				t.Fatal(err)
			}
		},
		code:   exitLockError,
		second: []string{"-n"},
	},
	{
		name: "broken portable lock",
		args: []string{"--protocol", "dir"},
		fire: func(t *testing.T, dir string, _ *exec.Cmd, _ *faultnet.Proxy) {
			if r := runHold(t, dir, "break", "--force", "--protocol", "dir", "T"); r.code != 0 {
				t.Fatalf("hold break --force: exit %d: %s", r.code, r.stderr)
			}
		},
		code:   exitLockError,
		second: []string{"--protocol", "dir", "-n"},
	},
	{
		name: "lost etcd lease",
		args: []string{"--ttl", stopAllTTL},
		fire: func(_ *testing.T, _ string, _ *exec.Cmd, px *faultnet.Proxy) {
			px.Cut()
		},
		code:   exitLockError,
		keeps:  true,
		second: []string{"-w", "60"},
		etcd:   true,
	},
}

// earlyLossRetries is how many times in a row a trial is run again when
// its etcd lease was lost before the trigger: on a loaded machine the
// embedded server may not answer a keep-alive in time, and hold then
// rightly stops its command before the trial has begun.
const earlyLossRetries = 3

// stopAllTrial runs one trial: hold runs command with the lock on T,
// trig stops it, and the checks of TestRunStopsEveryProcess follow. It
// returns false, having checked nothing, when an etcd lease was lost
// before the trigger.
func stopAllTrial(t *testing.T, trial int, trig stopTrigger, files map[string]string, command []string, trapsTerm bool, etcdAddr string) bool {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	target, secondTarget := "T", "T"
	var px *faultnet.Proxy
	if trig.etcd {
		var err error
		if px, err = faultnet.NewProxy(etcdAddr); err != nil {
			t.Fatal(err)
		}
		defer px.Close()
		key := fmt.Sprintf("stopall/%d-%d", os.Getpid(), time.Now().UnixNano())
		target, secondTarget = "etcd://"+px.Addr()+"/"+key, "etcd://"+etcdAddr+"/"+key
	}
	marker := fmt.Sprintf("stopall-%d-%d", os.Getpid(), time.Now().UnixNano())
	args := append([]string{holdBin, "run", "--kill-after", stopAllKillAfter}, trig.args...)
	args = append(append(args, target), command...)
	holder, herr := startMarkedCmd(t, marker, dir, nil, args...)
	t.Cleanup(func() { killMarked(marker) })
	// The command's processes are under way (the chain hops, the
	// daemon writes).
	if code, ok := waitUnderWay(t, trial, holder, dir); !ok {
		msg := herr.String()
		if trig.etcd && code == exitLockError && strings.Contains(msg, "lost") {
			t.Logf("trial %d: the lease was lost before the trigger (the server did not answer in time); the trial is run again: %s", trial, msg)
			return false
		}
		t.Fatalf("trial %d: hold exited %d before its command was under way: %s", trial, code, msg)
	}

	trig.fire(t, dir, holder, px)
	var second *exec.Cmd
	var secondOut bytes.Buffer
	startSecond := func() {
		second = exec.Command(holdBin, append(append([]string{"run"}, trig.second...), secondTarget, "-c", `echo "new $(date +%s%N)" >> log`)...)
		second.Dir = dir
		second.Stdout, second.Stderr = &secondOut, &secondOut
		if err := second.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if trig.keeps {
		startSecond()
	}
	code := waitExit(t, holder)
	// Nothing of the command may be left now, not even for a moment.
	left := markedAlive(marker)
	recorded := recordedAlive(t, dir, marker)
	if !trig.keeps {
		startSecond()
	}
	secondCode := waitExit(t, second)

	msg := herr.String()
	if len(left) > 0 || len(recorded) > 0 {
		t.Errorf("trial %d: processes of the command alive when hold exited: %v (recorded: %v); hold's stderr: %s", trial, left, recorded, msg)
	}
	want := trig.code
	if want == 0 {
		switch {
		case strings.Contains(msg, "sending SIGKILL"):
			want = exitKilled
		case trapsTerm:
			want = 0
		default:
			want = exitSignalBase + int(syscall.SIGTERM)
		}
	}
	if code != want {
		t.Errorf("trial %d: hold exited %d, want %d: %s", trial, code, want, msg)
	}
	if secondCode != 0 {
		t.Fatalf("trial %d: the second holder exited %d: %s", trial, secondCode, secondOut.String())
	}
	lastOld, firstNew := logOrder(t, filepath.Join(dir, "log"))
	if lastOld >= firstNew {
		t.Errorf("trial %d: the old command wrote to the log %v after the second holder's first write; hold's stderr: %s",
			trial, time.Duration(lastOld-firstNew), msg)
	}
	if trial == 0 {
		t.Logf("%d processes recorded; hold exited %d; the second holder's first write came %v after the old command's last",
			countLines(filepath.Join(dir, "pids")), code, time.Duration(firstNew-lastOld).Round(time.Millisecond))
	}
	return true
}

// recordedAlive lists the pids in dir/pids that still run with marker in
// their environment (a pid may have been reused by then; the marker says
// whether it is still the command's).
func recordedAlive(t *testing.T, dir, marker string) []int {
	t.Helper()
	want := []byte("HOLD_TEST_STOP=" + marker + "\x00")
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		t.Fatalf("the command recorded no pid: %v", err)
	}
	var alive []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			continue // a line cut short by SIGKILL
		}
		env, err := os.ReadFile(filepath.Join("/proc", f, "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		if p, ok := readStat(pid); ok && p.state != 'Z' && p.state != 'X' {
			alive = append(alive, pid)
		}
	}
	return alive
}

// killMarked kills whatever carries marker, over and over until several
// looks in a row find nothing: a process that forks and exits in a loop
// escapes a single look.
func killMarked(marker string) {
	deadline := time.Now().Add(hangLimit)
	for clean := 0; clean < 5 && time.Now().Before(deadline); {
		pids := markedAlive(marker)
		if len(pids) == 0 {
			clean++
			time.Sleep(10 * time.Millisecond)
			continue
		}
		clean = 0
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// waitUnderWay waits until the command of holder runs (dir/ready) and has
// written a few lines to dir/log. If hold exits first, it returns hold's
// exit status and false.
func waitUnderWay(t *testing.T, trial int, holder *exec.Cmd, dir string) (int, bool) {
	t.Helper()
	deadline := time.Now().Add(hangLimit)
	for {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil && countLines(filepath.Join(dir, "log")) >= 3 {
			return 0, true
		}
		if p, ok := readStat(holder.Process.Pid); !ok || p.state == 'Z' {
			return waitExit(t, holder), false
		}
		if time.Now().After(deadline) {
			t.Fatalf("trial %d: the command was not under way within %v (ready, 3 lines in log); hold's pid %d", trial, hangLimit, holder.Process.Pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func countLines(path string) int {
	b, _ := os.ReadFile(path)
	return bytes.Count(b, []byte("\n"))
}

// TestRunLeavesEarlierChildrenAlone: a shell that runs a job in the
// background and then execs hold makes that job hold's child; it is not
// the command's, so stopping the command neither signals it nor waits for
// it.
func TestRunLeavesEarlierChildrenAlone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := fmt.Sprintf("earlier-%d-%d", os.Getpid(), time.Now().UnixNano())
	// sh execs hold, so the process started is hold itself. The job does
	// not keep the stderr pipe, which the test waits for.
	holder, herr := startMarkedCmd(t, marker, dir, nil, "sh", "-c",
		`sleep 120 >/dev/null 2>&1 & echo $! > job; exec "$0" run --kill-after 0.5 T -c "`+foreground+`"`, holdBin)
	t.Cleanup(func() { killMarked(marker) })
	waitFor(t, filepath.Join(dir, "ready"))
	var job int
	if _, err := fmt.Sscan(readFile(t, filepath.Join(dir, "job")), &job); err != nil {
		t.Fatal(err)
	}
	if err := holder.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := waitExit(t, holder); code != exitSignalBase+int(syscall.SIGTERM) {
		t.Errorf("hold exited %d, want 143 (the command obeyed SIGTERM): %s", code, herr.String())
	}
	if p, ok := readStat(job); !ok || p.state == 'Z' || p.state == 'X' {
		t.Errorf("the shell's background job (pid %d), which is not the command's, was stopped with it", job)
	}
}
