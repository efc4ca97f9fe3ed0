//go:build unix

package fairq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/internal/resched"
	"github.com/hold-dev/hold/lock"
)

// The queue works on raw descriptors and *at system calls relative to the
// queue directory: one acquisition makes about fifteen system calls on the
// queue, and resolving the directory's path once keeps a directory renamed
// or replaced meanwhile from splitting one waiter's view of the queue.

// frontTickets is front on the queue directory. Leaving removes the
// waiter's ticket, then closes it.
func frontTickets(ctx context.Context, req *lock.Request, wait bool, free func() bool) (*Place, error) {
	q, err := openQueue(req.Path)
	if err != nil {
		return nil, err
	}
	me, err := q.join(ctx)
	if err != nil {
		q.close()
		return nil, waitEnded(ctx, req, whileJoining, err)
	}
	pl := &Place{leave: func() { q.leave(me); q.close() }}
	if req.Logger != nil {
		req.Logger.Debug("hold: joined fair queue", "path", req.Path, "ticket", me.n)
	}

	below := me.n
	for {
		pred, err := q.livePredecessor(below)
		if err != nil {
			pl.Leave()
			return nil, err
		}
		if pred == nil {
			break
		}
		if !wait {
			unix.Close(pred.fd)
			pl.Leave()
			return nil, errQueued
		}
		if req.Logger != nil {
			req.Logger.Debug("hold: waiting in fair queue", "path", req.Path, "ticket", me.n, "predecessor", pred.n)
		}
		var sw *stallWatch
		if free != nil {
			sw = &stallWatch{free: free, atFront: func() bool {
				p, err := q.livePredecessor(pred.n)
				if p != nil {
					unix.Close(p.fd)
				}
				return err == nil && p == nil
			}}
		}
		ctx = watching(ctx, req)
		err = waitFlock(ctx, pred.fd, unix.LOCK_SH, sw)
		if err == errStalled {
			// Passed over (see StallBound): its ticket stays, it is
			// alive; look below it. waitFlock has handed pred.fd to
			// the goroutine that still waits on it.
			if req.Logger != nil {
				req.Logger.Debug("hold: passed over a fair waiter that kept its place while the lock stayed free",
					"path", req.Path, "ticket", pred.n, "free for", StallBound)
			}
			below = pred.n
			continue
		}
		if err != nil {
			pl.Leave()
			if ctx.Err() == nil {
				// Otherwise waitShared has handed pred.fd to a goroutine
				// that closes it.
				unix.Close(pred.fd)
				err = q.error("wait in queue", err)
			}
			return nil, waitEnded(ctx, req, whileQueued, err)
		}
		marked := hasHeadMark(pred.fd)
		// The predecessor removes its ticket before unlocking it; one that
		// died may not have, and its name is never used again, so removing
		// it here is safe and keeps the queue clean.
		unix.Unlinkat(q.dfd, ticketName(pred.n), 0)
		unix.Close(pred.fd)
		if marked {
			break
		}
		// The predecessor gave up or died before reaching the front: the
		// waiters it was behind may still be queued. Every ticket between
		// it and this one was already gone when it was chosen.
		below = pred.n
	}

	if _, err := unix.Pwrite(me.fd, []byte{headMark}, 0); err != nil {
		pl.Leave()
		return nil, q.error("mark queue head", err)
	}
	return pl, nil
}

// queue is an open queue directory.
type queue struct {
	dir string // for error messages
	dfd int
}

// ticket is an open ticket file: this waiter's own (locked exclusively) or
// a predecessor's.
type ticket struct {
	n  uint64
	fd int
}

// openQueue opens the queue directory of the lock at lockPath, creating it
// if needed. O_NOFOLLOW: a symlink planted at the queue's path must not
// make us create files in a directory of its maker's choosing.
func openQueue(lockPath string) (*queue, error) {
	dir := lockPath + QueueSuffix
	q := &queue{dir: dir}
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Open(dir, flags, 0)
	if err == unix.ENOENT {
		if err = unix.Mkdir(dir, 0o777); err == nil || err == unix.EEXIST {
			fd, err = unix.Open(dir, flags, 0)
		}
	}
	if err != nil {
		return nil, q.error("open queue", err)
	}
	if why := notQueueDir(fd); why != "" {
		unix.Close(fd)
		return nil, &lock.Error{Op: "open queue", Path: dir, Err: lock.ErrForeign,
			Hint: why + "; hold creates files only in a queue directory of its own. Choose another lock path, or move it away if it is yours to move"}
	}
	q.dfd = fd
	return q, nil
}

// notQueueDir returns why the open directory dfd is not a queue of
// hold's, or "". A queue holds its counter and ticket files; one with a
// counter is taken as one (the counter's content is checked when it is
// read), and one without is listed: empty, it is a new queue, and any
// name that is not a ticket's makes it someone else's directory.
func notQueueDir(dfd int) string {
	if why, found := checkCounter(dfd); found {
		return why
	}
	fd, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "it cannot be listed: " + err.Error()
	}
	d := os.NewFile(uintptr(fd), "queue")
	defer d.Close()
	names, _ := d.Readdirnames(16)
	for _, n := range names {
		if n == counterName {
			// Created by a waiter that joined this new queue between our
			// look for it and the listing.
			if why, found := checkCounter(dfd); found {
				if why != "" {
					return why
				}
				continue
			}
		}
		if _, ok := parseTicket(n); !ok {
			return fmt.Sprintf("it holds %q, which is not a queue's", n)
		}
	}
	return ""
}

// checkCounter looks for the queue directory's counter: found reports
// whether there is one, and why, when it is not a plain file of its own.
func checkCounter(dfd int) (why string, found bool) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, counterName, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return "", false
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 1 {
		return "its " + counterName + " is not a plain file of its own", true
	}
	return "", true
}

func (q *queue) close() { unix.Close(q.dfd) }

// join takes the next ticket. The ticket file is created and locked while
// the counter is still locked, so no later waiter can see it unlocked
// unless its owner is gone.
func (q *queue) join(ctx context.Context) (*ticket, error) {
	cfd, err := unix.Openat(q.dfd, counterName, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o666)
	if err != nil {
		return nil, q.error("open queue counter", err)
	}
	if err := unix.Flock(cfd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		// Someone else is taking a ticket: that takes microseconds, unless
		// its process was stopped, so the wait still ends with ctx.
		if err := waitFlock(ctx, cfd, unix.LOCK_EX, nil); err != nil {
			if ctx.Err() != nil {
				return nil, err // waitFlock has handed cfd to a goroutine that closes it
			}
			unix.Close(cfd)
			return nil, q.error("lock queue counter", err)
		}
	}
	// Closing the only descriptor releases the counter lock.
	defer unix.Close(cfd)
	var buf [ticketDigits + 1]byte
	n, err := unix.Pread(cfd, buf[:], 0)
	if err != nil {
		return nil, q.error("read queue counter", err)
	}
	last, ok := parseTicket(string(buf[:min(n, ticketDigits)]))
	if !ok && n > 0 {
		// Not a counter hold wrote: someone's file, which the counter's
		// write would damage.
		return nil, &lock.Error{Op: "open queue", Path: q.dir, Err: lock.ErrForeign,
			Hint: "its " + counterName + " is not a queue counter; hold writes only into a queue of its own. Choose another lock path, or move it away if it is yours to move"}
	}
	if !ok {
		// A new queue: start above every ticket on disk, so that numbers
		// still only grow.
		if last, err = q.maxTicket(); err != nil {
			return nil, err
		}
	}
	for {
		t := last + 1
		if _, err := unix.Pwrite(cfd, []byte(ticketName(t)+"\n"), 0); err != nil {
			return nil, q.error("write queue counter", err)
		}
		fd, err := unix.Openat(q.dfd, ticketName(t), unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o666)
		if err == unix.EEXIST {
			// Left over from a counter that went back: never reuse a name.
			last = t
			continue
		}
		if err != nil {
			return nil, q.error("create ticket", err)
		}
		if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
			unix.Unlinkat(q.dfd, ticketName(t), 0)
			unix.Close(fd)
			return nil, q.error("lock ticket", err)
		}
		return &ticket{n: t, fd: fd}, nil
	}
}

// leave removes this waiter's ticket, then unlocks it by closing it: the
// successor wakes and finds the name already gone.
func (q *queue) leave(t *ticket) {
	unix.Unlinkat(q.dfd, ticketName(t.n), 0)
	unix.Close(t.fd)
}

// livePredecessor returns the highest ticket below `below` whose waiter is
// still queued, open, or nil when there is none (the caller is at the
// head). Tickets it finds abandoned are removed. The ticket just below is
// tried first: in a busy queue it is nearly always the one, and this saves
// reading the directory.
func (q *queue) livePredecessor(below uint64) (*ticket, error) {
	if below <= 1 {
		return nil, nil
	}
	if t, err := q.probe(below - 1); t != nil || err != nil {
		return t, err
	}
	names, err := q.names()
	if err != nil {
		return nil, err
	}
	var nums []uint64
	for _, name := range names {
		if n, ok := parseTicket(name); ok && n < below-1 {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	for i := len(nums) - 1; i >= 0; i-- {
		if t, err := q.probe(nums[i]); t != nil || err != nil {
			return t, err
		}
	}
	return nil, nil
}

// probe opens ticket n and returns it if its waiter still holds it. A
// ticket nobody holds belongs to a waiter that has gone (tickets below the
// caller's were locked before the caller got its number), so probe removes
// it and returns nil, as it does for a ticket that does not exist. The
// probe is a shared lock, so it does not disturb other waiters blocked on
// the same ticket.
func (q *queue) probe(n uint64) (*ticket, error) {
	name := ticketName(n)
	fd, err := unix.Openat(q.dfd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err == unix.ENOENT {
		return nil, nil
	}
	if err != nil {
		return nil, q.error("open ticket", err)
	}
	err = unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB)
	switch {
	case err == nil:
		unix.Unlinkat(q.dfd, name, 0)
		unix.Close(fd)
		return nil, nil
	case err == unix.EWOULDBLOCK || err == unix.EAGAIN || err == unix.EINTR:
		return &ticket{n: n, fd: fd}, nil
	}
	unix.Close(fd)
	return nil, q.error("probe ticket", err)
}

// names lists the queue directory.
func (q *queue) names() ([]string, error) {
	fd, err := unix.Openat(q.dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, q.error("read queue", err)
	}
	d := os.NewFile(uintptr(fd), q.dir)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, q.error("read queue", err)
	}
	return names, nil
}

// maxTicket is the highest ticket number on disk, 0 if none.
func (q *queue) maxTicket() (uint64, error) {
	names, err := q.names()
	if err != nil {
		return 0, err
	}
	var top uint64
	for _, name := range names {
		if n, ok := parseTicket(name); ok && n > top {
			top = n
		}
	}
	return top, nil
}

// hasHeadMark tells whether a ticket's waiter reached the head of the queue.
func hasHeadMark(fd int) bool {
	var b [1]byte
	n, err := unix.Pread(fd, b[:], 0)
	return err == nil && n == 1 && b[0] == headMark
}

// waitShared blocks until a shared lock on a predecessor's ticket is
// granted or ctx ends. Holding it never delays anyone: nobody else asks for
// it exclusively.
func waitShared(ctx context.Context, fd int) error { return waitFlock(ctx, fd, unix.LOCK_SH, nil) }

// waitFlock blocks until flock(2) grants how on fd or ctx ends, or the
// stall rule (sw, nil for none) passes the ticket's waiter over
// (errStalled). A blocked flock(2) cannot be interrupted from Go, so when
// ctx can end the call runs on its own goroutine; if the wait ends first,
// that goroutine keeps fd and closes it once the lock is granted, so an
// abandoned wait holds nothing. A wait nothing can end blocks in the
// kernel and has no stall rule (see ofdQueue.waitFor).
func waitFlock(ctx context.Context, fd, how int, sw *stallWatch) error {
	if ctx.Done() == nil {
		resched.BeforeBlocking()
		return flockRetry(fd, how)
	}
	done := make(chan error, 1)
	go func() { done <- flockRetry(fd, how) }()
	_, err := sw.await(ctx, done, func() { unix.Close(fd) })
	return err
}

// flockRetry is a blocking flock(2) that a signal does not end.
func flockRetry(fd, how int) error {
	for {
		if err := unix.Flock(fd, how); err != unix.EINTR {
			return err
		}
	}
}

// error wraps a failed step on the queue.
func (q *queue) error(op string, err error) error { return queueError(q.dir, op, err) }

// queueError describes a failed step on the queue at path.
func queueError(path, op string, err error) error {
	e := &lock.Error{Op: op, Path: path, Err: err}
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR):
		e.Err = lock.ErrNotRegular
		e.Hint = "a symbolic link or a file of the wrong type sits where the fair queue goes; remove it"
	case errors.Is(err, unix.ENOLCK), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		e.Err = errors.Join(lock.ErrUnsupported, err)
		e.Hint = "this filesystem refuses kernel locks, which fair mode needs for its queue"
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		e.Hint = "every fair waiter must be able to write the fair queue"
	}
	return e
}

// waitingTickets counts the ticket files in the queue directory that a
// waiter holds, without removing any.
func waitingTickets(lockPath string) (int, error) {
	dir := lockPath + QueueSuffix
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return 0, nil
	}
	if err != nil {
		return 0, queueError(dir, "open queue", err)
	}
	q := &queue{dir: dir, dfd: dfd}
	defer q.close()
	names, err := q.names()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range names {
		if _, ok := parseTicket(name); !ok {
			continue
		}
		fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		if unix.Flock(fd, unix.LOCK_SH|unix.LOCK_NB) != nil {
			n++
		}
		unix.Close(fd)
	}
	return n, nil
}
