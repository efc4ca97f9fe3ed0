package proc

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/hold-dev/hold/internal/testenv"
	"github.com/hold-dev/hold/lock"
)

func TestSelf(t *testing.T) {
	s := Self()
	if s.PID != os.Getpid() || len(s.Command) == 0 || s.Command[0] != os.Args[0] {
		t.Fatalf("Self = %+v", s)
	}
	s.Command[0] = "changed"
	if Self().Command[0] == "changed" {
		t.Fatal("Self shares its Command slice")
	}
	if runtime.GOOS == "linux" && s.ProcStart == 0 {
		t.Fatal("no start time for this process")
	}
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestJudge(t *testing.T) {
	me := Self()
	for _, c := range []struct {
		name string
		o    *lock.Owner
		want lock.Liveness
	}{
		{"no record", nil, lock.LivenessUnknown},
		{"no pid", &lock.Owner{}, lock.LivenessUnknown},
		{"other host", &lock.Owner{PID: me.PID, Host: me.Host + ".elsewhere"}, lock.LivenessUnknown},
		{"this process", &lock.Owner{PID: me.PID, Host: me.Host, ProcStart: me.ProcStart}, lock.Alive},
		{"this process, no start time", &lock.Owner{PID: me.PID}, lock.Alive},
		{"parent", &lock.Owner{PID: os.Getppid(), Host: me.Host}, lock.Alive},
		{"exited", &lock.Owner{PID: deadPID(t), Host: me.Host}, lock.Dead},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "parent" {
				testenv.SkipUnderWine(t, "a process started from Linux has no Windows parent: its parent pid names no process")
			}
			if got := Judge(c.o); got != c.want {
				t.Errorf("Judge = %v, want %v", got, c.want)
			}
		})
	}
	if runtime.GOOS == "linux" {
		ns, boot := Where()
		if ns == 0 || boot == "" {
			t.Fatalf("Where() = %d, %q: no pid namespace or boot id", ns, boot)
		}
		parent := os.Getppid()
		for _, c := range []struct {
			name string
			o    *lock.Owner
			want lock.Liveness
		}{
			// A pid of another namespace or boot says nothing here, dead
			// or alive: judged like one of another host.
			{"parent's pid, other pid namespace", &lock.Owner{PID: parent, Host: me.Host, PIDNS: ns + 1, BootID: boot}, lock.LivenessUnknown},
			{"parent's pid, other boot", &lock.Owner{PID: parent, Host: me.Host, PIDNS: ns, BootID: boot + "x"}, lock.LivenessUnknown},
			{"dead pid, other pid namespace", &lock.Owner{PID: deadPID(t), Host: me.Host, PIDNS: ns + 1}, lock.LivenessUnknown},
			{"this process's pid, other pid namespace", &lock.Owner{PID: me.PID, Host: me.Host, PIDNS: ns + 1}, lock.LivenessUnknown},
			{"parent, same namespace and boot", &lock.Owner{PID: parent, Host: me.Host, PIDNS: ns, BootID: boot}, lock.Alive},
			{"dead, same namespace and boot", &lock.Owner{PID: deadPID(t), Host: me.Host, PIDNS: ns, BootID: boot}, lock.Dead},
		} {
			if got := Judge(c.o); got != c.want {
				t.Errorf("%s: Judge = %v, want %v", c.name, got, c.want)
			}
		}

		// A live pid with another start time is a reused pid.
		o := &lock.Owner{PID: me.PID, ProcStart: me.ProcStart + 1}
		if got := Judge(o); got != lock.Dead {
			t.Errorf("this pid with another start time: %v, want dead", got)
		}
		pp := os.Getppid()
		start, ok := StartTime(pp)
		if !ok {
			t.Fatal("no start time for the parent")
		}
		if got := Alive(pp, start+1); got != lock.Dead {
			t.Errorf("parent pid with another start time: %v, want dead", got)
		}
		if got := Alive(pp, start); got != lock.Alive {
			t.Errorf("parent: %v", got)
		}
	}
}
