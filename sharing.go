package hold

import (
	"errors"

	"github.com/hold-dev/hold/internal/fsinfo"
)

// ErrMachineLocal means the lock is a kernel lock on a filesystem whose
// kernel locks other machines sharing it may not see (an NFS mount with
// local locks, most FUSE filesystems, a VM's shared folder): processes on
// two machines could then hold it at once. The portable protocol (package
// portable) works there. Lock.MachineLocal reports it; RefuseMachineLocal
// turns it into an acquisition error.
var ErrMachineLocal = errors.New("kernel locks here may not be seen by other machines")

// machineLocalHint says what to do about ErrMachineLocal.
const machineLocalHint = "use the portable protocol: --protocol dir, or hold.WithProtocol(portable.New()); `hold doctor DIR` checks the filesystem"

// machineLocalError is the cause of an ErrMachineLocal *Error: which
// filesystem, and why its kernel locks stay on this machine.
type machineLocalError struct {
	fs     string
	reason string
}

func (e *machineLocalError) Error() string {
	return "kernel locks on " + e.fs + " may not be seen by other machines: " + e.reason
}

func (e *machineLocalError) Is(target error) bool { return target == ErrMachineLocal }

// MachineLocal returns nil when the lock's protocol excludes processes on
// every machine that shares the lock path, as far as hold can tell, and an
// *Error matching ErrMachineLocal when it is a kernel lock on a filesystem
// whose kernel locks may stay on this machine: the error names the
// filesystem, says why, and hints at the remedy. hold's command prints it
// as a warning when the kernel lock was chosen by default.
//
// It is computed when called, from the open lock file: one fstatfs(2) on a
// local disk; on NFS, SMB, FUSE and cluster filesystems the mount options
// are read once per filesystem and remembered (see BenchmarkMachineLocal).
// An error finding out is returned as is (it does not match
// ErrMachineLocal). The portable and etcd protocols always return nil.
func (l *Lock) MachineLocal() error {
	f := l.File()
	if f == nil {
		return nil
	}
	fs, reason, err := fsinfo.LocalLocksOf(f)
	switch {
	case err != nil:
		return &Error{Op: "acquire", Path: l.path, Err: err}
	case reason == "":
		return nil
	}
	return &Error{Op: "acquire", Path: l.path, Err: &machineLocalError{fs: fs.String(), reason: reason}, Hint: machineLocalHint}
}

// refuseIfMachineLocal applies RefuseMachineLocal to a lock just taken.
func (c *config) refuseIfMachineLocal(l *Lock) (*Lock, error) {
	if !c.refuseMachineLocal {
		return l, nil
	}
	if err := l.MachineLocal(); err != nil {
		return nil, errors.Join(err, l.Release())
	}
	return l, nil
}
