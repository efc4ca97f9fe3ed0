//go:build unix

package pgtest

import "syscall"

// sysProcAttr runs a server program as uid:gid when asUser, and (on Linux)
// has it killed when the test process dies, so that no server outlives a
// test binary that was killed.
func sysProcAttr(uid, gid int, asUser bool) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if asUser {
		a.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	setDeathSignal(a)
	return a
}
