//go:build unix

package agent

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// syncChannel is the agent's end of the synchronous channel: two FIFOs in
// a private directory, which goes away as soon as the client has opened
// them (the first request proves it has).
type syncChannel struct {
	dir string

	removeOnce sync.Once

	mu       sync.Mutex // guards the descriptors' closing, and closing
	requests int        // the requests FIFO, read
	replies  int        // the replies FIFO, written
	wake     int        // the requests FIFO again, written without blocking
	closing  bool

	// pipelined: the client writes releases ahead of their replies
	// (hello's "pipeline"), so a lock's cycle is one round trip, the
	// release's reply coming with the next request's. Both sides poll
	// as on any channel (syncReader, replySpin): a cycle whose three
	// wake-ups (the agent's for the release and the next request, the
	// client's for its reply) were sleeps cost more CPU on both sides,
	// in the kernel's wake-ups and switches, than the polling that
	// skips them, and twice the time.
	pipelined bool
}

// The FIFOs' names in the channel's directory.
const (
	requestsFIFO = "requests"
	repliesFIFO  = "replies"
)

// openSync makes the synchronous channel and starts serving it: in dir if
// the client gave one, else in a new directory of its own; pipelined as
// the client's hello says (syncChannel.pipelined). It returns nil
// if the agent has one already, is closing, or cannot make one (dir is not
// a directory private to this user).
//
// Both FIFOs are opened for reading and writing. That open never blocks
// (a FIFO opened for one direction waits for the other end), so the client
// can open its ends at leisure; and the client, holding only the reading
// end of the replies, reads end of file the moment the agent dies. The
// replies FIFO is opened first: a client that could open the requests
// FIFO (which fails with ENXIO before the agent reads it) finds the
// replies open too, which is how a client that did not wait for the
// hello's reply knows that the channel is ready.
func (a *agent) openSync(dir string, pipelined bool) *syncPaths {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sync != nil || a.closed {
		return nil
	}
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "hold-agent-"); err != nil {
			return nil
		}
	} else if !privateDir(dir) {
		return nil
	}
	paths := &syncPaths{Requests: filepath.Join(dir, requestsFIFO), Replies: filepath.Join(dir, repliesFIFO)}
	ch := &syncChannel{dir: dir, requests: -1, replies: -1, wake: -1, pipelined: pipelined}
	var err error
	if ch.replies, err = openFIFO(paths.Replies, true); err == nil {
		if ch.requests, err = openFIFO(paths.Requests, true); err == nil {
			ch.wake, err = openFIFO(paths.Requests, false)
		}
	}
	if err != nil {
		ch.closeFiles()
		ch.remove()
		return nil
	}
	a.sync = ch
	go a.serveSync(ch)
	return paths
}

// privateDir reports whether dir is a directory of this user's that no
// one else may enter: the FIFOs made there are the client's way in.
func privateDir(dir string) bool {
	var st unix.Stat_t
	if unix.Lstat(dir, &st) != nil {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFDIR && st.Mode&0o077 == 0 && int(st.Uid) == os.Geteuid()
}

// openFIFO makes the FIFO path and opens it for reading and writing, or
// opens the existing one for writing without blocking.
func openFIFO(path string, create bool) (int, error) {
	flags := unix.O_RDWR | unix.O_CLOEXEC
	if create {
		if err := unix.Mkfifo(path, 0o600); err != nil {
			return -1, err
		}
	} else {
		flags = unix.O_WRONLY | unix.O_NONBLOCK | unix.O_CLOEXEC
	}
	for {
		fd, err := unix.Open(path, flags, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// serveSync answers the requests of the synchronous channel, one at a time,
// on this goroutine: a blocking read wakes it directly, without the
// runtime's poller in between.
func (a *agent) serveSync(ch *syncChannel) {
	defer ch.closeFiles()
	cpus := runtime.NumCPU()
	in := newSyncReader(ch.requests, cpus)
	out := &replyBatch{fd: ch.replies}
	in.flush = out.flush
	// The channel's first reply tells the client its polling budget
	// (replySpin): a client that opens the channel before it has read
	// the hello's reply (Node's synchronous API) learns it there too.
	spin := new(int)
	*spin = replySpin(cpus)
	readLines(in, func(line []byte) bool {
		ch.remove() // the client has opened both ends
		if ch.isClosing() {
			return false
		}
		req, r := parseRequest(line)
		var after func()
		if req != nil {
			r, after = a.syncDispatch(req)
		}
		if r == nil {
			return true // a blank line
		}
		if spin != nil {
			r.SpinMicros, spin = spin, nil
		}
		a.forClient(r)
		// A queued reply's real one comes on stdout, later: the
		// client has nothing to send meanwhile.
		in.expect = r.OK && !r.Queued
		if ch.pipelined && req != nil && req.Op == "release" && req.Sent > 0 {
			// A release written ahead: its client reads the reply with
			// the next one's, so it goes with it, in one write that
			// wakes the client once (see replyBatch).
			err := out.hold(encodeReply(r))
			if after != nil {
				after()
			}
			return err == nil
		}
		if out.write(encodeReply(r)) != nil {
			// The client closed its end: it is leaving. Its locks
			// are released when its standard input ends.
			if after != nil {
				after()
			}
			return false
		}
		if after != nil {
			after()
		}
		return true
	})
}

// closeSync stops the synchronous channel, if there is one: it marks it
// closing and wakes its reader with a blank line, so that the reader,
// which blocks in a read that closing the descriptor would not end,
// closes the descriptors itself. The wake-up never blocks: a reader busy
// elsewhere finds the channel closing when it next reads.
func (a *agent) closeSync() {
	a.mu.Lock()
	ch := a.sync
	a.mu.Unlock()
	if ch == nil {
		return
	}
	ch.remove()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.closing = true
	if ch.wake >= 0 {
		unix.Write(ch.wake, []byte("\n"))
	}
}

func (ch *syncChannel) isClosing() bool {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.closing
}

// remove deletes the two FIFOs and their directory, which the agent made;
// nothing else, should anything else have appeared there.
func (ch *syncChannel) remove() {
	ch.removeOnce.Do(func() {
		os.Remove(filepath.Join(ch.dir, requestsFIFO))
		os.Remove(filepath.Join(ch.dir, repliesFIFO))
		os.Remove(ch.dir)
	})
}

func (ch *syncChannel) closeFiles() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, fd := range []*int{&ch.requests, &ch.replies, &ch.wake} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// replyBatch writes the synchronous channel's replies. It holds back
// those of releases written ahead (request.Sent on a pipelined channel),
// which their client reads only with the reply to its next request: they
// go out with the next reply written, in one write, or before the agent
// next waits for a request (syncReader.flush), so that a client that
// reads them without sending anything (before a request on the standard
// channel, or as it exits) gets them at once. A client that wrote a
// release and its next request before the agent woke is then woken once
// for both replies, not once for each.
type replyBatch struct {
	fd   int
	held []byte
}

// heldMax bounds the replies held back: one write of them stays atomic.
const heldMax = 4096

// hold keeps the reply b back.
func (w *replyBatch) hold(b []byte) error {
	w.held = append(w.held, b...)
	if len(w.held) >= heldMax {
		return w.flush()
	}
	return nil
}

// write writes the replies held back and b.
func (w *replyBatch) write(b []byte) error {
	if len(w.held) > 0 {
		b = append(w.held, b...)
		w.held = w.held[:0]
	}
	return writeAll(w.fd, b)
}

// flush writes the replies held back.
func (w *replyBatch) flush() error {
	if len(w.held) == 0 {
		return nil
	}
	err := writeAll(w.fd, w.held)
	w.held = w.held[:0]
	return err
}

// syncReader reads the requests FIFO in blocking mode. When requests come
// in quick succession (a lock, a short critical section, its release), it
// polls for the next one for up to syncSpin before it blocks: a thread
// that sleeps in read must be woken by the kernel for the next request,
// which on a virtual machine whose CPU went idle costs tens of µs, more
// than the lock. It polls only when the request before came within
// syncSpin of the read that waited for it and its reply was a success
// (after a busy lock the client goes to wait on the standard channel), so
// a client that locks rarely costs nothing; and only with more than one
// CPU, where the client runs meanwhile on another.
type syncReader struct {
	fd    int
	multi bool // more than one CPU
	quick bool // the last request came within syncSpin
	// expect: the last reply was a success, so another request is
	// likely to follow (set by the server).
	expect bool
	// flush, if set, writes the replies held back before a read that
	// may wait (replyBatch).
	flush func() error
}

// syncSpin bounds the polling for the next request. It covers what a
// Node client does between a lock's reply and its release when the
// critical section is short, so that such a release finds the agent awake
// instead of a sleeping thread (the bench suite's Node rows measure it).
const syncSpin = 100 * time.Microsecond

// replySpin is the budget, in µs, that the channel's first reply tells
// the client for polling the replies FIFO before it blocks in a read
// (clients have no figure of their own): replySpinBudget, or 0 with a
// single CPU, where the client's polling would only keep the agent from
// running. The agent decides it, for every client, because both figures
// are the agent's: how soon it answers, and whether it can run meanwhile.
func replySpin(cpus int) int {
	if cpus <= 1 {
		return 0
	}
	return int(replySpinBudget / time.Microsecond)
}

// replySpinBudget covers a reply the agent gives at once while its thread
// is awake (it polls for syncSpin after a success; a try or a release
// takes 5 to 15 µs) and a quick wake of a thread that slept. A reply later
// than that means the agent is waiting for a CPU, which polling would only
// take from it. 50 µs was the Python client's own figure, 200 the Node
// client's; in the bench suite's rows on a shared 2-CPU machine 100 cost
// the Python client's contended rows more than 50 did, and 50 cost the
// Node client nothing against 200.
const replySpinBudget = 50 * time.Microsecond

// newSyncReader reads fd, polling only where cpus > 1.
func newSyncReader(fd, cpus int) *syncReader {
	return &syncReader{fd: fd, multi: cpus > 1}
}

// Read reads the next requests, polling first when one is likely to
// follow at once (see syncReader).
func (r *syncReader) Read(b []byte) (int, error) {
	if r.flush != nil {
		if err := r.flush(); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	if r.multi && r.quick && r.expect {
		pfd := []unix.PollFd{{Fd: int32(r.fd), Events: unix.POLLIN}}
		for time.Since(start) < syncSpin {
			if n, _ := unix.Poll(pfd, 0); n > 0 {
				break
			}
		}
	}
	for {
		n, err := unix.Read(r.fd, b)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, err
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		r.quick = time.Since(start) <= syncSpin
		return n, nil
	}
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}
