package cli

import (
	"os"
	"os/exec"
	"unsafe"

	"golang.org/x/sys/windows"
)

// tree is every process the command started, as a job object on Windows:
// the command is put in it as soon as it has started, and the processes
// it starts join it by themselves. A process the command starts in the
// instant before it joins the job, or with CREATE_BREAKAWAY_FROM_JOB, is
// not in it. Windows has no SIGTERM: stopping the command kills it at
// once.
type tree struct {
	job   windows.Handle // 0 if no job could be made; then only the command is killed
	child *os.Process
}

// jobAccounting is JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, which
// golang.org/x/sys/windows does not define.
type jobAccounting struct {
	TotalUserTime, TotalKernelTime                 int64
	ThisPeriodTotalUserTime, ThisPeriodTotalKernel int64
	TotalPageFaultCount                            uint32
	TotalProcesses, ActiveProcesses                uint32
	TotalTerminatedProcesses                       uint32
}

// newTree prepares the job the command will be put in.
func newTree(*exec.Cmd) *tree {
	job, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return &tree{}
	}
	return &tree{job: job}
}

// exits is nil: orphans are not hold's to reap here.
func (t *tree) exits() <-chan os.Signal { return nil }

// reapOrphans does nothing: see exits.
func (t *tree) reapOrphans() {}

// close does nothing; the job handle goes with hold.
func (t *tree) close() {}

// started puts the command in the job. If it cannot (hold's own job
// forbids it), only the command itself will be killed.
func (t *tree) started(p *os.Process) {
	t.child = p
	if t.job == 0 {
		return
	}
	h, err := windows.OpenProcess(windows.PROCESS_SET_QUOTA|windows.PROCESS_TERMINATE, false, uint32(p.Pid))
	if err == nil {
		err = windows.AssignProcessToJobObject(t.job, h)
		windows.CloseHandle(h)
	}
	if err != nil {
		windows.CloseHandle(t.job)
		t.job = 0
	}
}

// terminate kills every process of the command (Windows has no SIGTERM).
func (t *tree) terminate(os.Signal) int { return t.kill() }

// kill kills every process of the command and returns how many were left.
func (t *tree) kill() int {
	n := t.alive()
	if t.job != 0 {
		windows.TerminateJobObject(t.job, 1)
	} else if t.child != nil {
		t.child.Kill()
	}
	return n
}

// alive returns how many processes of the command are left. Without a
// job it returns 0: the command's own exit is what hold waits for then.
func (t *tree) alive() int {
	if t.job == 0 {
		return 0
	}
	var info jobAccounting
	if err := windows.QueryInformationJobObject(t.job, windows.JobObjectBasicAccountingInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)), nil); err != nil {
		return 0
	}
	return int(info.ActiveProcesses)
}

// none reports whether no process of the command is left, once the
// command itself has exited: the job has no active process (without a
// job, the command's exit is all hold can follow).
func (t *tree) none() bool { return t.alive() == 0 }

const treeHelp = `  On loss of the lock hold kills the command and every process it
  started (a job object), and exits once the job has no process left. A
  process started with CREATE_BREAKAWAY_FROM_JOB, or in the instant before
  the command joined the job, is out of reach.`
