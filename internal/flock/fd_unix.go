//go:build unix

package flock

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/lock"
)

// Descriptor locks are flock(1)'s other form, `flock -n 9` after the shell
// ran `exec 9>FILE`: one flock(2) on a descriptor this process inherited.
// The lock belongs to the open file description, which the shell shares,
// so it outlives this process and is the shell's until the shell closes
// the descriptor or unlocks it. No file is opened and no owner record is
// written (the shell's `9>FILE` empties the file anyway); `hold status`
// names the holders by the pids the kernel reports.

// pollCap bounds the pause between tries of a bounded wait on a descriptor.
const pollCap = 25 * time.Millisecond

// LockFD takes a kernel lock on the open descriptor fd: shared or
// exclusive; at once or not at all with nonblock; otherwise waiting until
// ctx ends. A wait ctx can end is made of non-blocking tries, ever further
// apart up to pollCap: a blocked flock(2) cannot be taken back, and a
// grant that came after the deadline would leave the shell's descriptor
// locked while this process reports failure. A wait nothing can end is one
// blocking flock(2). Taking a lock the description holds in the other mode
// converts it, which flock(2) does not do atomically.
func LockFD(ctx context.Context, fd int, shared, nonblock bool) error {
	how := unix.LOCK_EX
	if shared {
		how = unix.LOCK_SH
	}
	if !nonblock && ctx.Done() == nil {
		return fdError(fd, flockRetry(fd, how))
	}
	pause := time.Millisecond
	for {
		err := flockRetry(fd, how|unix.LOCK_NB)
		if !isBusy(err) {
			return fdError(fd, err)
		}
		if nonblock {
			return busyFD(fd, lock.ErrBusy)
		}
		select {
		case <-ctx.Done():
			return busyFD(fd, lock.WaitError(ctx.Err()))
		case <-time.After(pause):
		}
		pause = min(2*pause, pollCap)
	}
}

// UnlockFD drops the kernel lock of the open descriptor fd (flock -u).
func UnlockFD(fd int) error {
	return fdError(fd, flockRetry(fd, unix.LOCK_UN))
}

func flockRetry(fd, how int) error {
	for {
		if err := unix.Flock(fd, how); err != unix.EINTR {
			return err
		}
	}
}

// fdName names descriptor fd in messages: "descriptor 9 (/srv/x.lock)".
func fdName(fd int) string {
	name := "descriptor " + strconv.Itoa(fd)
	if p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err == nil {
		name += " (" + p + ")"
	}
	return name
}

func busyFD(fd int, why error) error {
	f := &lockFile{fd: fd}
	return &lock.Error{Op: "acquire", Path: fdName(fd), Err: why, Holder: holderOf(f, false)}
}

func fdError(fd int, err error) error {
	switch err {
	case nil:
		return nil
	case unix.EBADF:
		return &lock.Error{Op: "lock", Path: "descriptor " + strconv.Itoa(fd), Err: fmt.Errorf("not open"),
			Hint: fmt.Sprintf("open it in the shell first, as for flock(1): exec %d>FILE, or ( hold run -n %d || exit 1; ... ) %d>FILE", fd, fd, fd)}
	}
	return lockError(fdName(fd), err)
}
