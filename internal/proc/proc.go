// Package proc answers questions about processes that lock holders need:
// who am I (pid, host, command line, start time), is that holder still
// alive, and, on Linux, which processes the kernel says hold a lock.
//
// It is the one place that decides whether a recorded owner is alive; the
// protocols build their staleness rules on Judge.
package proc

import (
	"os"
	"sync"

	"github.com/hold-dev/hold/lock"
)

// self is computed once: a process has exactly one identity.
var self = sync.OnceValue(func() lock.Owner {
	host, _ := os.Hostname()
	pid := os.Getpid()
	start, _ := StartTime(pid)
	return lock.Owner{
		PID:       pid,
		Host:      host,
		ProcStart: start,
		Command:   MaskSecrets(os.Args),
	}
})

// Self returns a record describing this process (PID, Host, ProcStart,
// Command), without ID, time or fence. The Command slice is a fresh copy,
// with values that look like secrets masked (MaskSecrets).
func Self() lock.Owner {
	o := self()
	o.Command = append([]string(nil), o.Command...)
	return o
}

// SelfShared is Self without the copy: its Command is shared by every
// call and must not be modified (a protocol only encodes it).
func SelfShared() lock.Owner { return self() }

// Hostname is this machine's host name as Self records it.
func Hostname() string { return self().Host }

// where is what places this process's pid, beyond the host name: its pid
// namespace and the machine's boot, computed once (see Where).
var where = sync.OnceValues(func() (uint64, string) { return pidNamespace(), bootID() })

// Where returns what places a pid of this process beyond the host name:
// the pid namespace (on Linux, the inode number of /proc/self/ns/pid) and
// the boot (/proc/sys/kernel/random/boot_id). Zero and "" where unknown.
// The portable protocol records them (lock.Owner's PIDNS and BootID), so
// that a holder in a container which shares the host's name is not judged
// by a pid of another namespace.
func Where() (pidNS uint64, boot string) { return where() }

// Local reports whether the pid of a record can be asked about here: the
// record is from this host and, where it says so, from this pid namespace
// and this boot. A record that names a namespace or boot this process
// cannot confirm (its own is unknown) is not local either: a pid is only
// meaningful in its own namespace. Records without them (earlier
// versions, other tools) are local when the host matches, as before.
func Local(o *lock.Owner) bool {
	if o.Host != "" && o.Host != self().Host {
		return false
	}
	if o.PIDNS == 0 && o.BootID == "" {
		return true
	}
	ns, boot := where()
	if o.PIDNS != 0 && o.PIDNS != ns {
		return false
	}
	return o.BootID == "" || o.BootID == boot
}

// Judge says whether the holder named by a record is alive. A record from
// another host, or from another pid namespace or boot of this one (a
// container that shares the host's name), cannot be judged from here
// (LivenessUnknown): see Local. Otherwise a pid that does not exist is
// dead, and so is a pid whose start time differs from the recorded one:
// the pid was reused by an unrelated process.
func Judge(o *lock.Owner) lock.Liveness {
	if o == nil || o.PID <= 0 {
		return lock.LivenessUnknown
	}
	if !Local(o) {
		return lock.LivenessUnknown
	}
	me := self()
	if o.PID == me.PID {
		// This very process, unless the pid was reused: then the one
		// recorded is gone. No need to ask the system.
		if o.ProcStart == 0 || me.ProcStart == 0 || o.ProcStart == me.ProcStart {
			return lock.Alive
		}
		return lock.Dead
	}
	return Alive(o.PID, o.ProcStart)
}

// Alive says whether process pid runs on this host and, when procStart is
// not zero and the OS reports start times, whether it is still the same
// process.
func Alive(pid int, procStart uint64) lock.Liveness {
	switch exists(pid) {
	case lock.Dead:
		return lock.Dead
	case lock.LivenessUnknown:
		return lock.LivenessUnknown
	}
	if procStart != 0 {
		if now, ok := StartTime(pid); ok && now != procStart {
			return lock.Dead
		}
	}
	return lock.Alive
}
