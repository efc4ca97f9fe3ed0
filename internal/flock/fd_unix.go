//go:build unix

package flock

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/lock"
)

// Descriptor locks are flock(1)'s other form, `flock -n 9` after the shell
// ran `exec 9>>FILE`: one flock(2) on a descriptor this process inherited.
// The lock belongs to the open file description, which the shell shares,
// so it outlives this process and is the shell's until the shell closes
// the descriptor or unlocks it. An exclusive lock's owner record names
// the process that keeps the descriptor, the one that lent it to this
// process (its parent, the shell or subshell), not this process, which
// ends at once: where the file is hold's to write (empty, or holding a
// record of hold's, with one link), it is written through a second open
// of the same file, with the next fencing token. `hold run -u FD` leaves
// a past record in its place before it unlocks.

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
//
// keeper, when not nil, is the owner record of an exclusive lock: the
// process that keeps the descriptor (see above).
func LockFD(ctx context.Context, fd int, shared, nonblock bool, keeper *lock.Owner) error {
	if err := inherited(fd); err != nil {
		return err
	}
	how := unix.LOCK_EX
	if shared {
		how = unix.LOCK_SH
	}
	if !nonblock && ctx.Done() == nil {
		err := flockRetry(fd, how)
		if err == nil && !shared && keeper != nil {
			recordKeeper(fd, *keeper)
		}
		return fdError(fd, err)
	}
	pause := time.Millisecond
	for {
		err := flockRetry(fd, how|unix.LOCK_NB)
		if !isBusy(err) {
			if err == nil && !shared && keeper != nil {
				recordKeeper(fd, *keeper)
			}
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
// An exclusive lock's record that names keeper's pid (the descriptor
// form's, see LockFD) is replaced first by a past record, which keeps
// the token for the next holder and names nobody.
func UnlockFD(fd int, keeper int) error {
	if err := inherited(fd); err != nil {
		return err
	}
	if keeper > 0 && flockRetry(fd, unix.LOCK_EX|unix.LOCK_NB) == nil {
		// This description holds the lock exclusively (or it was free
		// and is now ours): nobody else writes the file meanwhile.
		eraseKeeper(fd, keeper)
	}
	return fdError(fd, flockRetry(fd, unix.LOCK_UN))
}

// inherited refuses fd, as not open, unless it is a descriptor this
// process inherited from the one that started it: the shell's `exec
// 9>FILE`. A descriptor the shell has closed may well be open in this
// process under the same number, opened by the Go runtime before main
// (`exec 7>&-; hold run -n 7` locked the runtime's descriptor 7 and said
// nothing, issue 53), and locking that is locking nothing the shell has.
//
// The close-on-exec flag tells the two apart, whatever the number and
// whenever it is asked. execve(2) closes every descriptor that has the
// flag, so each one inherited arrived without it, and nothing in this
// process sets it on one. Everything this process opens has it: the
// runtime's descriptors (the cgroup CPU-limit files it keeps open from
// before any package is initialized, its epoll and eventfd, pidfds),
// the os package's files and hold's own, which Go opens with O_CLOEXEC
// (EPOLL_CLOEXEC, ...) to keep them from leaking into a command. A list
// of the descriptors open when the process started would not do: the
// runtime opens its first before the earliest package initializer runs,
// so no code of hold's can see the process as it was inherited. (The
// one gap: when descriptor 0, 1 or 2 is closed at start, the runtime
// opens /dev/null there without the flag; this form's FD is any number,
// but locking a shell's stdin is not what it is for.)
func inherited(fd int) error {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		return fdError(fd, err)
	}
	if flags&unix.FD_CLOEXEC != 0 {
		// The shell's descriptor fd is closed: said as when this process
		// has none either.
		return notOpen(fd)
	}
	return nil
}

// notOpen is the error of a descriptor the shell did not pass: not open,
// and what to do.
func notOpen(fd int) error {
	return &lock.Error{Op: "lock", Path: "descriptor " + strconv.Itoa(fd), Err: fmt.Errorf("not open"),
		Hint: fmt.Sprintf("open it in the shell first, as for flock(1): exec %d>>FILE, or ( hold run -n %d || exit 1; ... ) %d>>FILE (>> keeps what FILE holds; > would empty it, and a lock file emptied so starts its fencing tokens again)", fd, fd, fd)}
}

// reopenFD opens the file of descriptor fd again, for reading and
// writing, as a lockFile; nil when it cannot be (no /proc, a file this
// process may not write, something other than a regular file).
func reopenFD(fd int) *lockFile {
	name := "/proc/self/fd/" + strconv.Itoa(fd)
	rfd, err := openRetry(name, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil
	}
	fi, err := checkRegular(rfd, name, false)
	var orig unix.Stat_t
	if err != nil || unix.Fstat(fd, &orig) != nil || fi.id != (fileKey{uint64(orig.Dev), uint64(orig.Ino)}) {
		unix.Close(rfd)
		return nil
	}
	f := &lockFile{fd: rfd, path: name, id: fi.id, links: fi.links, uid: fi.uid, changed: fi.changed}
	if f.otherUsers() {
		f.close()
		return nil
	}
	return f
}

// recordKeeper writes keeper's owner record, with the next fencing
// token, into the file of descriptor fd, which this process has just
// locked exclusively, when the file is hold's to write (foreign). Best
// effort: without it the lock holds all the same, named by the kernel.
func recordKeeper(fd int, keeper lock.Owner) {
	f := reopenFD(fd)
	if f == nil {
		return
	}
	defer f.close()
	var buf [readSize]byte
	size, raw, err := readRecord(f, buf[:])
	if err != nil || foreign(f, size, raw) != "" {
		return
	}
	last := lastFence(size, raw)
	if last == math.MaxUint64 {
		last--
	}
	keeper.Fence = last + 1
	keeper.ID = lock.NewID()
	keeper.StartedAt = time.Now()
	keeper.Protocol = "flock"
	b := keeper.AppendEncode(make([]byte, 0, readSize))
	if len(b) > lock.MaxRecordSize || f.writeAt(b, 0) != nil {
		return
	}
	if size > int64(len(b)) {
		f.truncate(int64(len(b)))
	}
}

// eraseKeeper replaces a live record naming pid keeper in the file of
// descriptor fd by a past record (see recordKeeper and the handle's
// erase).
func eraseKeeper(fd int, keeper int) {
	f := reopenFD(fd)
	if f == nil {
		return
	}
	defer f.close()
	var buf [readSize]byte
	_, raw, err := readRecord(f, buf[:])
	if err != nil || !lock.IsRecord(raw) {
		return
	}
	rec, ok := lock.DecodeOwner(raw)
	if !ok || rec == nil || rec.Released || rec.PID != keeper {
		return
	}
	if f.writeAt(lock.AppendPastRecord(buf[:0], rec.Fence, len(raw)), 0) == nil {
		if n := lock.PastRecordLen(rec.Fence); n < len(raw) {
			f.truncate(int64(n))
		}
	}
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
		return notOpen(fd)
	}
	return lockError(fdName(fd), err)
}
