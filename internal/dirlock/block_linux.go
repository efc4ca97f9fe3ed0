package dirlock

import (
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hold-dev/hold/internal/resched"
)

// blockingWatch is a watch that its waiter reads itself, in blocking
// system calls: the sleep of a waiter whose context cannot end (see
// waiter.sleep), on an inotify instance of its own rather than the
// Protocol's shared one.
//
// Why: a goroutine that waits on a channel leaves its P idle, and a
// process whose Ps are all idle lets the Go runtime's monitor thread
// (sysmon) sleep deeply; the first system call after waking then wakes
// the monitor, which from then on polls every 20 µs for a millisecond and
// more, through the process's next wait in the gate's queue (a blocking
// system call, during which the P counts as busy). A waiter at the front
// of the gate goes through that on every hand-off. In a blocking ppoll(2)
// the P stays busy, and the monitor keeps its 10 ms pace. It also spares
// the shared instance's reader goroutine, a second thread woken for every
// event. (Figures: docs/portable.md#cost and docs/bench.md.)
type blockingWatch struct {
	pool *blockPool
	fd   int
	wd   int32
	name string
}

// blockPool keeps one idle inotify instance between waits: closing an
// instance waits for an RCU grace period (milliseconds), far too long to
// pay per wait. An instance idle for blockIdle is closed.
type blockPool struct {
	mu    sync.Mutex
	idle  int // -1: none
	timer *time.Timer
}

const blockIdle = 2 * time.Second

// maxBlock bounds one blocking call: sysmon takes the P of a goroutine
// that has been in one system call for 10 ms.
const maxBlock = 8 * time.Millisecond

// newBlockingWatch watches the removal of path, or returns nil when
// inotify cannot be used (the caller then uses the shared instance).
func (p *Protocol) newBlockingWatch(path string) *blockingWatch {
	bp := &p.blocks
	bp.mu.Lock()
	fd := -1
	if bp.timer != nil && bp.idle >= 0 {
		fd, bp.idle = bp.idle, -1
	}
	bp.mu.Unlock()
	if fd < 0 {
		var err error
		if fd, err = unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK); err != nil {
			return nil
		}
	}
	wd, err := unix.InotifyAddWatch(fd, filepath.Dir(path), watchMask)
	if err != nil {
		unix.Close(fd)
		return nil
	}
	return &blockingWatch{pool: bp, fd: fd, wd: int32(wd), name: filepath.Base(path)}
}

// close drops the watch and keeps the instance for the next wait.
func (b *blockingWatch) close() {
	unix.InotifyRmWatch(b.fd, uint32(b.wd))
	bp := b.pool
	bp.mu.Lock()
	defer bp.mu.Unlock()
	if bp.timer == nil {
		bp.idle = -1
		bp.timer = time.AfterFunc(blockIdle, bp.expire)
	}
	if bp.idle >= 0 {
		// Another waiter's instance is kept already.
		go unix.Close(b.fd)
		return
	}
	bp.idle = b.fd
	// Moving a pending timer later never wakes the runtime's poller,
	// where starting one does.
	bp.timer.Reset(blockIdle)
}

// expire closes the kept instance once nobody has used it for blockIdle.
func (bp *blockPool) expire() {
	bp.mu.Lock()
	fd := bp.idle
	bp.idle = -1
	bp.mu.Unlock()
	if fd >= 0 {
		unix.Close(fd)
	}
}

// wait blocks for up to d, or until the lock path is removed or renamed
// (byEvent), in calls of at most maxBlock.
func (b *blockingWatch) wait(d time.Duration) (byEvent bool) {
	deadline := time.Now().Add(d)
	fds := []unix.PollFd{{Fd: int32(b.fd), Events: unix.POLLIN}}
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		ts := unix.NsecToTimespec(int64(min(left, maxBlock)))
		resched.BeforeBlocking()
		n, err := unix.Ppoll(fds, &ts, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// The instance cannot be waited on: sleep out the rest, as the
			// backoff would without events.
			time.Sleep(left)
			return false
		}
		if n > 0 && b.drain() {
			return true
		}
	}
}

// drain reads the pending events and reports whether one of this watch's
// is the lock's removal, or may hide it (an overflow, the watch gone).
// Events of earlier watches on the same instance are dropped.
func (b *blockingWatch) drain() bool {
	var buf [4096]byte
	found := false
	for {
		n, err := unix.Read(b.fd, buf[:])
		if err == unix.EINTR {
			continue
		}
		if n <= 0 || err != nil {
			return found
		}
		// A read that did not fill the buffer took every queued event:
		// no second read just to hear EAGAIN. Events that arrive after it
		// wake the next poll.
		last := n < len(buf)-unix.SizeofInotifyEvent-unix.NAME_MAX-1
		eachEvent(buf[:n], func(ev *unix.InotifyEvent, name string) {
			switch {
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				found = true
			case ev.Wd != b.wd:
			case ev.Mask&unix.IN_IGNORED != 0, name == b.name:
				found = true
			}
		})
		if last {
			return found
		}
	}
}
