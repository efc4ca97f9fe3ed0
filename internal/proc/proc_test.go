package proc

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"github.com/hold-dev/hold/internal/core"
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
		o    *core.Owner
		want core.Liveness
	}{
		{"no record", nil, core.LivenessUnknown},
		{"no pid", &core.Owner{}, core.LivenessUnknown},
		{"other host", &core.Owner{PID: me.PID, Host: me.Host + ".elsewhere"}, core.LivenessUnknown},
		{"this process", &core.Owner{PID: me.PID, Host: me.Host, ProcStart: me.ProcStart}, core.Alive},
		{"this process, no start time", &core.Owner{PID: me.PID}, core.Alive},
		{"parent", &core.Owner{PID: os.Getppid(), Host: me.Host}, core.Alive},
		{"exited", &core.Owner{PID: deadPID(t), Host: me.Host}, core.Dead},
	} {
		if got := Judge(c.o); got != c.want {
			t.Errorf("%s: Judge = %v, want %v", c.name, got, c.want)
		}
	}
	if runtime.GOOS == "linux" {
		ns, boot := Where()
		if ns == 0 || boot == "" {
			t.Fatalf("Where() = %d, %q: no pid namespace or boot id", ns, boot)
		}
		parent := os.Getppid()
		for _, c := range []struct {
			name string
			o    *core.Owner
			want core.Liveness
		}{
			// A pid of another namespace or boot says nothing here, dead
			// or alive: judged like one of another host.
			{"parent's pid, other pid namespace", &core.Owner{PID: parent, Host: me.Host, PIDNS: ns + 1, BootID: boot}, core.LivenessUnknown},
			{"parent's pid, other boot", &core.Owner{PID: parent, Host: me.Host, PIDNS: ns, BootID: boot + "x"}, core.LivenessUnknown},
			{"dead pid, other pid namespace", &core.Owner{PID: deadPID(t), Host: me.Host, PIDNS: ns + 1}, core.LivenessUnknown},
			{"this process's pid, other pid namespace", &core.Owner{PID: me.PID, Host: me.Host, PIDNS: ns + 1}, core.LivenessUnknown},
			{"parent, same namespace and boot", &core.Owner{PID: parent, Host: me.Host, PIDNS: ns, BootID: boot}, core.Alive},
			{"dead, same namespace and boot", &core.Owner{PID: deadPID(t), Host: me.Host, PIDNS: ns, BootID: boot}, core.Dead},
		} {
			if got := Judge(c.o); got != c.want {
				t.Errorf("%s: Judge = %v, want %v", c.name, got, c.want)
			}
		}

		// A live pid with another start time is a reused pid.
		o := &core.Owner{PID: me.PID, ProcStart: me.ProcStart + 1}
		if got := Judge(o); got != core.Dead {
			t.Errorf("this pid with another start time: %v, want dead", got)
		}
		pp := os.Getppid()
		start, ok := StartTime(pp)
		if !ok {
			t.Fatal("no start time for the parent")
		}
		if got := Alive(pp, start+1); got != core.Dead {
			t.Errorf("parent pid with another start time: %v, want dead", got)
		}
		if got := Alive(pp, start); got != core.Alive {
			t.Errorf("parent: %v", got)
		}
	}
}
