package fairq

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/resched"
	"github.com/hold-dev/hold/lock"
)

// On Linux the queue is one file, "<lock path>.queue", and tickets are
// open file description (OFD) byte-range locks in it rather than files:
// byte 0 is the counter's lock (the counter itself is text at the start of
// the file), and ticket t is the byte at slotBase+t. A waiter holds a write
// lock on its own slot while it is queued and waits on its predecessor's
// slot with a read lock (F_OFD_SETLKW), so it still sleeps in the kernel
// until the predecessor leaves or dies. Nothing is created or removed per
// acquisition: creating a file costs more than a whole kernel-lock
// acquisition, while a lock on a byte costs one system call.
// There is no dead ticket to clean either: a dead waiter's slot lock is
// gone with its last descriptor.
//
// The head needs no mark: a waiter whose predecessor has left asks the
// kernel (F_OFD_GETLK over every slot below its own) whether any earlier
// waiter is still queued.
//
// An acquisition whose context cannot end makes eleven system calls on
// the queue, contended or not: open and statx it; lock the counter, read
// it, lock the new slot, write the counter, unlock it; wait on the slot
// below (at once done if nobody holds it) and drop that read lock; one
// probe below that; close. A waiter more than stageTickets back, in a
// process whose last wait was long, waits (and drops) once more.

// slotBase is the offset of ticket 0's byte, past the counter's text.
const slotBase = 1 << 20

// stageTickets is the shortest stride of a staged wait. A waiter far back
// in the queue does not wait for its predecessor in one blocking call: it
// first waits for the ticket a stride past the front to leave, then for
// the one a stride further, and so on, and only then for its predecessor.
// No ticket below one's own can still be queued when one reaches the
// front, so the early waits never delay it.
//
// Why: the Go runtime's monitor thread takes the P away from a goroutine
// that has been in one system call for 10 ms, and from then on the
// process's monitor wakes every 20 µs for a millisecond each time the
// call returns. In a long queue that costs more CPU than the hand-offs
// themselves (with 100 fair waiters on 2 CPUs, 61 monitor sleeps and 75
// context switches per acquisition), which slows every hand-off, which
// lengthens every wait further: the queue collapses. So no single wait
// may be expected to last longer than stageSpan, whatever the queue's
// length: the stride is the number of hand-offs that fit in it, at the
// rate this process last saw. Each step costs one more wake-up, so a
// process stages only while its waits are long (stageAfter). The figures
// are in docs/bench.md and docs/fair.md.
const stageTickets = 16

// stageSpan is how long one step of a staged wait may be expected to
// last: well under the runtime's 10 ms, with room for a rate that slows
// and for the gap since the process last passed through the scheduler
// (resched.BeforeBlocking, before each step, at most every 5 ms).
const stageSpan = 3 * time.Millisecond

// stageAfter is how long this process's last wait in a queue must have
// lasted for the next one to be staged (the first one is): well under the
// 10 ms that matter, so that a queue slowing down stages before any wait
// reaches them.
const stageAfter = 4 * time.Millisecond

// lastWait is how long the last wait in a queue lasted in this process,
// in nanoseconds, and perTicket how long it took per ticket that was
// ahead when it joined (0: not known): the runtime's monitor, which the
// staging is about, is one per process too.
var lastWait, perTicket atomic.Int64

// stageSteps bounds the steps of one staged wait: each costs a wake-up,
// and with many more (a stride of 16 at 300 waiters) the wake-ups cost
// more than the monitor's polling they avoid. Where that many do not fit
// the runtime's bound, the steps grow longer instead.
const stageSteps = 3

// stageLimit is the longest a step of a staged wait may be expected to
// take: where the queue is so slow that the steps would outlast the
// runtime's 10 ms anyway, each step would cost a retake of its own, so
// the wait takes one step only, to stageTickets before its own ticket.
const stageLimit = 8 * time.Millisecond

// stageStride is the number of tickets a step of a staged wait spans, for
// a waiter ahead tickets from the front; false: do not stage.
func stageStride(ahead uint64) (uint64, bool) {
	stride := max(stageTickets, (ahead+stageSteps)/(stageSteps+1))
	per := perTicket.Load()
	if per <= 0 {
		return stride, true
	}
	stride = max(stride, uint64(int64(stageSpan)/per))
	return stride, time.Duration(int64(stride)*per) <= stageLimit
}

// queueFileSuffix names the Linux queue file.
const queueFileSuffix = QueueFileSuffix

func front(ctx context.Context, req *lock.Request, wait, ticketFiles bool, free func() bool) (*Place, error) {
	if ticketFiles {
		return frontTickets(ctx, req, wait, free)
	}
	return frontOFD(ctx, req, wait, free)
}

// ofdQueue is one waiter's open queue file.
type ofdQueue struct {
	path string
	fd   int
	id   fileKey // the file fd is open on, as openOFDQueue found it
}

// frontOFD is front on the queue file. Closing the file's descriptor
// leaves the queue: the kernel drops every OFD lock of it, the waiter's
// own slot with the rest.
func frontOFD(ctx context.Context, req *lock.Request, wait bool, free func() bool) (*Place, error) {
	q, err := openOFDQueue(req.Path + queueFileSuffix)
	if err != nil {
		return nil, err
	}
	me, err := q.join(ctx)
	if err != nil {
		unix.Close(q.fd)
		return nil, waitEnded(ctx, req, whileJoining, err)
	}
	if req.Logger != nil {
		req.Logger.Debug("hold: joined fair queue", "path", req.Path, "ticket", me)
	}
	pl := &Place{leave: func() { unix.Close(q.fd) }}
	var front uint64 // the front of the queue on joining, when staged
	if wait {
		start := time.Now()
		defer func() {
			d := time.Since(start)
			lastWait.Store(int64(d))
			if front != 0 && front < me {
				perTicket.Store(int64(d) / int64(me-front))
			}
		}()
	}
	// Staged when the last wait was long, or there was none yet: a
	// process's first wait may be at the back of a long queue.
	if last := time.Duration(lastWait.Load()); wait && me > stageTickets && (last == 0 || last > stageAfter) {
		var err error
		if front, err = q.stagedWait(watching(ctx, req), req, me, free); err != nil {
			pl.Leave()
			return nil, waitEnded(ctx, req, whileQueued, err)
		}
	}
	below, first := me, true
	for {
		var pred uint64
		if first && wait && ctx.Done() == nil && me > 1 && req.Watch == nil {
			// In a queue with waiters the ticket just below is nearly
			// always held: wait on it at once instead of asking the kernel
			// first, one system call fewer per acquisition. If nobody
			// holds it the wait returns at once, and the search below it
			// follows as after any wait. (A watched wait asks first: its
			// watch is told only of a wait that happens.)
			pred = me - 1
		} else {
			if pred, err = q.highestLive(below, first); err != nil {
				pl.Leave()
				return nil, err
			}
		}
		if pred == 0 {
			return pl, nil
		}
		if !wait {
			pl.Leave()
			return nil, errQueued
		}
		if req.Logger != nil {
			req.Logger.Debug("hold: waiting in fair queue", "path", req.Path, "ticket", me, "predecessor", pred)
		}
		ctx = watching(ctx, req)
		if err := q.waitFor(ctx, pred, free); err == errStalled {
			q.stalled(req, pred)
		} else if err != nil {
			pl.Leave()
			return nil, waitEnded(ctx, req, whileQueued, err)
		}
		// The predecessor has left: it got the main lock, gave up or died.
		// Only in the first case are all earlier waiters gone too, so look
		// again below it; every ticket between it and this one was already
		// gone when it was chosen.
		below, first = pred, false
	}
}

// stagedWait waits, a stride at a time, until ticket me's predecessor is
// at most about a stride ahead (see stageTickets), and returns the ticket
// it found at the front (0: none), from which the caller learns the rate
// of the queue. It only shortens the final wait on the predecessor, never replaces
// it: every step is a wait for a waiter that will leave before me reaches
// the front.
func (q *ofdQueue) stagedWait(ctx context.Context, req *lock.Request, me uint64, free func() bool) (front uint64, err error) {
	// The front: F_OFD_GETLK reports the oldest conflicting lock on the
	// file, nearly always the lowest ticket; a higher one only makes the
	// first step shorter.
	if front, err = q.held(1, me-1); err != nil || front == 0 {
		return front, err
	}
	first, stride := front, uint64(0)
	if st, ok := stageStride(me - front); ok {
		first, stride = front+st, st
	} else if me-front > stageTickets {
		// Too slow for steps that fit: one step to stageTickets before
		// this ticket, so that at least the last wait, the one the
		// hand-off to this waiter follows, ends without a retake.
		first, stride = me-stageTickets, stageTickets
	}
	for t := first; stride > 0 && t+stride/2 < me; t += stride {
		// Only a ticket still queued is waited for: asking costs one
		// call, waiting two.
		live, err := q.held(t, 1)
		if err != nil {
			return front, err
		}
		if live == 0 {
			continue
		}
		if req.Logger != nil {
			req.Logger.Debug("hold: waiting in fair queue", "path", req.Path, "ticket", me, "predecessor", t, "staged", true)
		}
		if err := q.waitFor(ctx, t, free); err == errStalled {
			// Passed over; the next step, and the search after the
			// staging, find who is left.
			q.stalled(req, t)
		} else if err != nil {
			return front, err
		}
	}
	return front, nil
}

// openOFDQueue opens (creating) the queue file. O_NOFOLLOW and the type
// check: a symlink or special file planted at its path is refused.
func openOFDQueue(path string) (*ofdQueue, error) {
	q := &ofdQueue{path: path}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0o666)
	if err != nil {
		return nil, q.error("open queue", err)
	}
	id, err := fileID(fd)
	if err != nil {
		unix.Close(fd)
		return nil, q.error("open queue", err)
	}
	if id.mode != unix.S_IFREG {
		unix.Close(fd)
		return nil, &lock.Error{Op: "open queue", Path: path, Err: lock.ErrNotRegular,
			Hint: "the fair queue must be a regular file; remove what is there"}
	}
	if why := notQueueFile(fd); why != "" {
		unix.Close(fd)
		return nil, &lock.Error{Op: "open queue", Path: path, Err: lock.ErrForeign,
			Hint: why + "; hold writes only into a queue file of its own. Choose another lock path, or move it away if it is yours to move"}
	}
	q.fd, q.id = fd, id
	return q, nil
}

// notQueueFile returns why the open file fd is not a fair queue file of
// hold's, or "". A queue file holds at most its counter line, a ticket
// number and a newline (the tickets themselves are byte-range locks, not
// data), and has one link. Anything else at its name is someone's data,
// which the counter's write would damage.
func notQueueFile(fd int) string {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return "it cannot be examined: " + err.Error()
	}
	if st.Nlink != 1 {
		return fmt.Sprintf("it has %d hard links", st.Nlink)
	}
	if st.Size == 0 {
		return ""
	}
	var buf [ticketDigits + 2]byte
	n, _ := unix.Pread(fd, buf[:], 0)
	if st.Size != ticketDigits+1 || n != ticketDigits+1 || buf[ticketDigits] != '\n' {
		return fmt.Sprintf("it holds %d bytes that are not a queue counter", st.Size)
	}
	if _, ok := parseTicket(string(buf[:ticketDigits])); !ok {
		return "it holds something other than a queue counter"
	}
	return ""
}

// ofdLock is one F_OFD_* call on n bytes at off.
func ofdLock(fd, cmd int, typ int16, off, n int64) (*unix.Flock_t, error) {
	lk := &unix.Flock_t{Type: typ, Whence: 0, Start: off, Len: n}
	for {
		err := unix.FcntlFlock(uintptr(fd), cmd, lk)
		if err != unix.EINTR {
			return lk, err
		}
	}
}

func busy(err error) bool { return err == unix.EAGAIN || err == unix.EACCES }

// join takes the next ticket: under the counter's lock, read the last
// number, lock the next ticket's slot, and only then publish the number
// and unlock the counter. A crash before the number is published leaves
// it unused, and the next waiter takes it.
func (q *ofdQueue) join(ctx context.Context) (uint64, error) {
	unlock, err := q.lockCounter(ctx)
	if err != nil {
		return 0, err
	}
	defer unlock()
	var buf [ticketDigits]byte
	n, err := unix.Pread(q.fd, buf[:], 0)
	if err != nil {
		return 0, q.error("read queue counter", err)
	}
	last, ok := parseTicket(string(buf[:n]))
	if !ok {
		// A new queue, or a counter someone damaged: continue above every
		// ticket still held, so that no newcomer goes ahead of a waiter.
		if last, err = q.highestHeld(); err != nil {
			return 0, err
		}
	}
	for {
		t := last + 1
		_, err := ofdLock(q.fd, unix.F_OFD_SETLK, unix.F_WRLCK, slotBase+int64(t), 1)
		if busy(err) {
			last = t
			continue
		}
		if err != nil {
			return 0, q.error("lock ticket", err)
		}
		if _, err := unix.Pwrite(q.fd, []byte(ticketName(t)+"\n"), 0); err != nil {
			return 0, q.error("write queue counter", err)
		}
		return t, nil
	}
}

// lockCounter takes the counter's lock (byte 0). Someone else holds it only
// for the few system calls of taking a ticket, unless its process was
// stopped, so the wait still ends with ctx: as in waitFor, a wait that ctx
// can end happens on a second open file description, which an abandoned
// wait closes once it is granted the lock.
func (q *ofdQueue) lockCounter(ctx context.Context) (unlock func(), err error) {
	_, err = ofdLock(q.fd, unix.F_OFD_SETLK, unix.F_WRLCK, 0, 1)
	if err != nil && busy(err) && ctx.Done() == nil {
		resched.BeforeBlocking()
		_, err = ofdLock(q.fd, unix.F_OFD_SETLKW, unix.F_WRLCK, 0, 1)
	}
	if err == nil {
		return func() { ofdLock(q.fd, unix.F_OFD_SETLK, unix.F_UNLCK, 0, 1) }, nil
	}
	if !busy(err) {
		return nil, q.error("lock queue counter", err)
	}
	wfd, err := q.reopen()
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() {
		_, err := ofdLock(wfd, unix.F_OFD_SETLKW, unix.F_WRLCK, 0, 1)
		done <- err
	}()
	finished, err := (*stallWatch)(nil).await(ctx, done, func() { unix.Close(wfd) })
	switch {
	case !finished:
		return nil, err
	case err != nil:
		unix.Close(wfd)
		return nil, q.error("lock queue counter", err)
	}
	return func() { unix.Close(wfd) }, nil
}

// highestLive returns the highest ticket below `below` whose waiter is
// still queued, or 0. F_OFD_GETLK reports one lock that conflicts with a
// read lock on a range, that is a waiter's write lock on its slot (waiting
// successors' read locks do not conflict); asking again above the ticket
// it reported finds the highest in a few calls. On joining (first), the
// ticket just below is checked on its own first: in a busy queue it is
// nearly always the one.
func (q *ofdQueue) highestLive(below uint64, first bool) (uint64, error) {
	if below <= 1 {
		return 0, nil
	}
	if first {
		live, err := q.held(below-1, 1)
		if err != nil || live != 0 {
			return live, err
		}
	}
	var found uint64
	from := uint64(1)
	for from < below {
		live, err := q.held(from, below-from)
		if err != nil {
			return 0, err
		}
		if live == 0 {
			return found, nil
		}
		found, from = live, live+1
	}
	return found, nil
}

// highestHeld returns the highest ticket whose slot is held, or 0. Each
// F_OFD_GETLK reports some held ticket; asking again above it ends at the
// highest.
func (q *ofdQueue) highestHeld() (uint64, error) {
	var top uint64
	for {
		live, err := q.held(top+1, 1<<62-top)
		if err != nil || live == 0 {
			return top, err
		}
		top = live
	}
}

// held returns a ticket in [from, from+n) whose slot is write-locked, or 0.
func (q *ofdQueue) held(from, n uint64) (uint64, error) {
	lk, err := ofdLock(q.fd, unix.F_OFD_GETLK, unix.F_RDLCK, slotBase+int64(from), int64(n))
	if err != nil {
		return 0, q.error("probe queue", err)
	}
	if lk.Type == unix.F_UNLCK {
		return 0, nil
	}
	t := lk.Start - slotBase
	if t < int64(from) {
		// A lock that starts below the range (not one of ours): count it
		// as the range's first ticket.
		t = int64(from)
	}
	return uint64(t), nil
}

// waitFor sleeps until ticket pred's waiter leaves: a read lock on its
// slot is granted only then. A blocked
// F_OFD_SETLKW cannot be interrupted from Go, so when ctx can end, the wait
// uses a second open file description on its own goroutine; if ctx ends
// first that goroutine is abandoned and closes its descriptor once the
// predecessor leaves, while this waiter leaves the queue at once.
//
// With a stall rule (free not nil) a wait that ctx can end also ends, with
// errStalled, when the rule passes the predecessor over. A wait that
// nothing can end keeps the kernel's blocking wait and no stall rule: the
// rule needs this goroutine free to look at the lock, that is the second
// path, which costs about a third of the hand-off rate (docs/bench.md).
func (q *ofdQueue) waitFor(ctx context.Context, pred uint64, free func() bool) error {
	off := slotBase + int64(pred)
	if ctx.Done() == nil {
		resched.BeforeBlocking()
		if _, err := ofdLock(q.fd, unix.F_OFD_SETLKW, unix.F_RDLCK, off, 1); err != nil {
			return q.error("wait in queue", err)
		}
		// The read lock could stay until the queue file is closed (nobody
		// locks that slot again), one system call fewer per wait, but
		// every lock on the file lengthens the list each F_OFD_* call on
		// it walks, so dropping it at once is the faster of the two.
		ofdLock(q.fd, unix.F_OFD_SETLK, unix.F_UNLCK, off, 1)
		return nil
	}
	wfd, err := q.reopen()
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		_, err := ofdLock(wfd, unix.F_OFD_SETLKW, unix.F_RDLCK, off, 1)
		done <- err
	}()
	finished, err := q.stallWatch(free, pred).await(ctx, done, func() { unix.Close(wfd) })
	if !finished {
		return err
	}
	unix.Close(wfd)
	if err != nil {
		return q.error("wait in queue", err)
	}
	return nil
}

// stallWatch returns the stall rule for a wait on ticket t, nil when
// there is none (free is nil).
func (q *ofdQueue) stallWatch(free func() bool, t uint64) *stallWatch {
	if free == nil {
		return nil
	}
	return &stallWatch{free: free, atFront: func() bool {
		live, err := q.highestLive(t, false)
		return err == nil && live == 0
	}}
}

// stalled reports a waiter the stall rule passed over, naming it where it
// can be found, in the debug log.
func (q *ofdQueue) stalled(req *lock.Request, t uint64) {
	if req.Logger == nil {
		return
	}
	args := []any{"path", req.Path, "ticket", t, "free for", StallBound}
	if pid, ok := proc.OFDLockOwner(q.path, slotBase+int64(t)); ok {
		args = append(args, "pid", pid, "command", proc.Cmdline(pid), "stopped", proc.Stopped(pid))
	}
	req.Logger.Debug("hold: passed over a fair waiter that kept its place while the lock stayed free", args...)
}

// headWaiter finds the fair waiter at the front of the queue file: the
// process whose open queue file holds the lowest ticket.
func headWaiter(lockPath string) (Waiter, bool) {
	path := lockPath + queueFileSuffix
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return Waiter{}, false
	}
	defer unix.Close(fd)
	q := &ofdQueue{path: path, fd: fd}
	t, err := q.held(1, 1<<62-1)
	if err != nil || t == 0 {
		return Waiter{}, false
	}
	pid, ok := proc.OFDLockOwner(path, slotBase+int64(t))
	if !ok {
		return Waiter{}, false
	}
	return Waiter{PID: pid, Command: proc.Cmdline(pid), Stopped: proc.Stopped(pid)}, true
}

// reopen opens the queue file again, as a new open file description, and
// makes sure it is the same file.
func (q *ofdQueue) reopen() (int, error) {
	// Read-write: a write lock (the counter's) needs a descriptor open
	// for writing.
	fd, err := unix.Open(q.path, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return -1, q.error("open queue", err)
	}
	id, err := fileID(fd)
	if err != nil || id != q.id {
		unix.Close(fd)
		if err == nil {
			err = errors.New("the queue file was replaced while in use")
		}
		return -1, q.error("open queue", err)
	}
	return fd, nil
}

// fileKey is what openOFDQueue and reopen check of the queue file: its
// type, and its identity.
type fileKey struct {
	mode     uint32 // the S_IFMT bits
	dev, ino uint64
}

// fileID asks statx for the file's type and inode only. A full fstat
// would read its timestamps too, and since Linux 6.13 a file whose
// timestamps were read gets fine-grained ones on its next change, so the
// counter write of every join would have to dirty the inode.
func fileID(fd int) (fileKey, error) {
	var stx unix.Statx_t
	const want = unix.STATX_TYPE | unix.STATX_INO
	err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, want, &stx)
	if err == nil && stx.Mask&want == want {
		return fileKey{uint32(stx.Mode) & unix.S_IFMT, unix.Mkdev(stx.Dev_major, stx.Dev_minor), stx.Ino}, nil
	}
	if err != nil && err != unix.ENOSYS {
		return fileKey{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileKey{}, err
	}
	return fileKey{st.Mode & unix.S_IFMT, uint64(st.Dev), st.Ino}, nil
}

func (q *ofdQueue) error(op string, err error) error {
	return queueError(q.path, op, err)
}

// waiting counts the fair waiters queued for the lock at lockPath.
func waiting(lockPath string) (int, error) {
	fd, err := unix.Open(lockPath+queueFileSuffix, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err == unix.ENOENT {
		return waitingTickets(lockPath)
	}
	if err != nil {
		return 0, queueError(lockPath+queueFileSuffix, "open queue", err)
	}
	defer unix.Close(fd)
	q := &ofdQueue{path: lockPath + queueFileSuffix, fd: fd}
	n := 0
	for from := uint64(1); ; n++ {
		live, err := q.held(from, 1<<62-from)
		if err != nil || live == 0 {
			return n, err
		}
		from = live + 1
	}
}
