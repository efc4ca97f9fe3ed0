//go:build unix

package cli

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// assertEmptyDir fails if dir holds anything: doctor's scratch directory
// must be gone.
func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("left behind in %s: %s", dir, e.Name())
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestDoctorLocalIsSafe(t *testing.T) {
	dir := t.TempDir()
	r := runHold(t, dir, "doctor")
	if r.code != 0 {
		t.Fatalf("hold doctor: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := lastLine(r.stdout); !strings.HasPrefix(got, "safe: hold uses flock here") {
		t.Errorf("verdict line %q", got)
	}
	for _, probe := range []string{"lock-exclusive", "lock-shared", "lock-flock-fcntl", "lock-released-on-exit",
		"mkdir-atomic", "create-exclusive", "rename-atomic", "notify", "clock"} {
		if !strings.Contains(r.stdout, "pass  "+probe) {
			t.Errorf("probe %s did not pass:\n%s", probe, r.stdout)
		}
	}
	assertEmptyDir(t, dir)

	// PATH as an argument, the dir protocol, JSON.
	other := t.TempDir()
	r = runHold(t, dir, "doctor", "--json", "--protocol", "dir", other)
	if r.code != 0 {
		t.Fatalf("hold doctor --json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rep struct {
		Path          string `json:"path"`
		Protocol      string `json:"protocol"`
		Verdict       string `json:"verdict"`
		Summary       string `json:"summary"`
		SecondProcess bool   `json:"second_process"`
		Probes        []struct {
			Name, Result string
		} `json:"probes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	if rep.Protocol != "dir" || rep.Verdict != "safe" || !strings.HasPrefix(rep.Summary, "safe: hold uses dir here") {
		t.Errorf("report %+v", rep)
	}
	if !rep.SecondProcess {
		t.Error("the CLI did not use a second process")
	}
	if len(rep.Probes) != 10 {
		t.Errorf("%d probes: %+v", len(rep.Probes), rep.Probes)
	}
	if evaled, _ := filepath.EvalSymlinks(other); rep.Path != other && rep.Path != evaled {
		t.Errorf("path %q, want %q", rep.Path, other)
	}
	assertEmptyDir(t, other)
}

func TestDoctorExitStatus(t *testing.T) {
	dir := t.TempDir()
	// Could not tell: the directory does not exist.
	r := runHold(t, dir, "doctor", filepath.Join(dir, "missing"))
	if r.code != 2 || !strings.HasPrefix(lastLine(r.stdout), "could not tell") {
		t.Errorf("missing directory: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = runHold(t, dir, "doctor", "--json", filepath.Join(dir, "missing"))
	if r.code != 2 || !strings.Contains(r.stdout, `"verdict": "unknown"`) {
		t.Errorf("missing directory, JSON: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Usage errors.
	for _, args := range [][]string{{"doctor", "a", "b"}, {"doctor", "--protocol", "nosuch"}, {"doctor", "--bogus"}} {
		if r := runHold(t, dir, args...); r.code != exitUsage {
			t.Errorf("hold %v: exit %d, want %d\n%s", args, r.code, exitUsage, r.stderr)
		}
	}
	assertEmptyDir(t, dir)
}

// startDoctorStalled starts `hold doctor DIR` in its own process group
// (as a shell starts a job), stalled after probe, and waits until it says
// so.
func startDoctorStalled(t *testing.T, dir, probe string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(holdBin, "doctor", dir)
	cmd.Env = append(os.Environ(), stallEnv+"="+probe)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	errf, err := os.CreateTemp(t.TempDir(), "stderr-")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = errf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if cmd.ProcessState == nil {
			cmd.Wait()
		}
	})
	deadline := time.Now().Add(hangLimit)
	for {
		b, _ := os.ReadFile(errf.Name())
		if strings.Contains(string(b), "stalled after "+probe) {
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("doctor did not stall after %s: %s", probe, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// groupGone waits until no live process of the group pgid is left.
// Zombies do not count: an orphan is reaped by whatever runs as pid 1,
// which in a container may be slow to do it or never do it.
func groupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(hangLimit)
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			t.Fatalf("processes of group %d still run", pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true // no /proc: any member, zombie or not, counts
	}
	for _, p := range procs {
		b, err := os.ReadFile(filepath.Join("/proc", p.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may contain anything.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) >= 3 && fields[2] == strconv.Itoa(pgid) && fields[0] != "Z" {
			return true
		}
	}
	return false
}

// TestDoctorInterrupted sends SIGINT to the whole process group, as ^C on
// a terminal does, while doctor holds locks and files in its scratch
// directory (its second process too): doctor exits 130 and leaves nothing,
// neither files nor processes.
func TestDoctorInterrupted(t *testing.T) {
	for _, probe := range []string{"filesystem", "lock-exclusive", "mkdir-atomic", "clock"} {
		t.Run(probe, func(t *testing.T) {
			dir := t.TempDir()
			cmd := startDoctorStalled(t, dir, probe)
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Fatalf("no scratch directory while stalled: %v", ents)
			}
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			if code := waitExit(t, cmd); code != 128+int(syscall.SIGINT) {
				t.Errorf("exit %d, want %d", code, 128+int(syscall.SIGINT))
			}
			assertEmptyDir(t, dir)
			groupGone(t, cmd.Process.Pid)
		})
	}
}

// TestDoctorKilled: SIGKILL leaves doctor no chance to clean up, but its
// second process notices and removes the scratch directory.
func TestDoctorKilled(t *testing.T) {
	dir := t.TempDir()
	cmd := startDoctorStalled(t, dir, "lock-shared")
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitExit(t, cmd)
	groupGone(t, cmd.Process.Pid)
	assertEmptyDir(t, dir)
}

// TestDoctorPeerRefusesStrangeDirectories: the hidden peer command removes
// only a doctor scratch directory when its doctor vanishes.
func TestDoctorPeerRefusesStrangeDirectories(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "precious")
	if err := os.Mkdir(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(holdBin, doctorPeerCommand, keep)
	cmd.Stdin = strings.NewReader("") // the doctor is gone at once
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "ready") {
		t.Errorf("peer said %q", out)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("peer removed %s: %v", keep, err)
	}
}
