//go:build unix

package cli

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/errkind"
	"github.com/hold-dev/hold/internal/lockspec"
)

// execLocked is -F (flock -F): it replaces hold with the command, which
// keeps the lock's descriptor, named by HOLD_LOCK_FD, and so the lock,
// until it exits. It returns only when the command could not be started.
// Nothing of hold is left to pass signals on, to watch the lock file, or
// to replace the owner record with a past one at the end: the record, which
// names this pid (the command's, after the exec), stays until the next
// holder rewrites it.
func execLocked(l *hold.Lock, spec *lockspec.Resolved, argv []string) error {
	f := l.File()
	if f == nil {
		return usagef("--no-fork needs the kernel lock: this lock is kept by hold, which -F replaces with the command")
	}
	path, err := lookPath(argv[0])
	if err != nil {
		return &errkind.ExecError{Cmd: argv[0], Err: err}
	}
	fd := int(f.Fd())
	env := append(commandEnv(l, spec), "HOLD_LOCK_FD="+strconv.Itoa(fd))
	// The descriptors were opened close-on-exec; this exec is the one that
	// must keep them: the lock's, and a semaphore slot's other two.
	files := l.Files()
	for _, kf := range files {
		if _, err := unix.FcntlInt(kf.Fd(), unix.F_SETFD, 0); err != nil {
			return &errkind.ExecError{Cmd: argv[0], Err: err}
		}
	}
	err = unix.Exec(path, argv, env)
	for _, kf := range files {
		unix.FcntlInt(kf.Fd(), unix.F_SETFD, unix.FD_CLOEXEC)
	}
	return &errkind.ExecError{Cmd: argv[0], Err: &os.PathError{Op: "exec", Path: path, Err: err}}
}
