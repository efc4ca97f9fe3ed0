package dirlock

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// On Linux every waiter of a Protocol shares one inotify instance, read by
// one goroutine, with one watch per lock directory's parent, asking the
// kernel only for what wakes a waiter: an entry deleted (IN_DELETE) or
// renamed away (IN_MOVED_FROM; release and reclaim move the lock aside).
//
// This replaces a watcher per acquisition (fsnotify's), which cost an
// inotify instance, a reader goroutine and a poller registration for every
// wait, and woke every waiting process for every change in the directory
// (each create, write and attribute change, including every holder's
// heartbeat and the caller's own files next to the lock), not just for the
// lock's removal. fsnotify has no way to narrow its event mask, hence
// inotify through x/sys/unix here; Windows keeps fsnotify.

// watchMask is what a parent directory is watched for.
const watchMask = unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_ONLYDIR

// hubIdle is how long an inotify instance with nobody waiting is kept: a
// process taking a busy lock in a loop keeps it instead of paying for a new
// one on every wait, and a Protocol that is dropped releases it soon after.
//
// Its watches are not kept: a directory's watch is removed as soon as the
// last waiter on anything in it is gone. A watch with nobody waiting still
// wakes this process (its reader) for every release and every tomb deleted
// in that directory; with the waiting gate, every local waiter but one
// sleeps on the gate without a subscription, and idle watches kept by each
// of them turned every release back into a wake-up of every waiting
// process. Adding a watch again costs one inotify_add_watch(2).
const hubIdle = 2 * time.Second

// watchHub is a Protocol's source of directory events (Linux).
type watchHub struct {
	mu  sync.Mutex
	ino *inotify // nil until a waiter needs one, and again after hubIdle
}

// inotify is one inotify instance and its subscribers.
type inotify struct {
	f      *os.File         // the instance, non-blocking: reads park in the netpoller
	fd     int              // f's descriptor (f.Fd would make it blocking)
	dirs   map[string]int32 // parent directory → watch descriptor
	byWD   map[int32]map[string]map[*subscription]struct{}
	subs   int         // live subscriptions
	idle   *time.Timer // closes the instance once idle
	closed bool
}

// subscription is one waiter's interest in one lock path.
type subscription struct {
	hub  *watchHub
	ino  *inotify
	wd   int32
	name string
	c    chan struct{}
	once sync.Once
}

func (s *subscription) C() <-chan struct{} { return s.c }

func (s *subscription) close() { s.once.Do(func() { s.hub.unsubscribe(s) }) }

func (s *subscription) signal() {
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// watchRemovals subscribes to the removal of path. It returns nil (the
// waiter then polls) when inotify is unavailable: out of instances or
// watches, or a parent directory that cannot be watched.
func (p *Protocol) watchRemovals(path string) removals {
	h := &p.watches
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.subscribe(path, make(chan struct{}, 1))
	if s == nil {
		return nil
	}
	return s
}

// watchRemovalsOf subscribes to the removal of any of paths, on one
// channel; nil (poll) when any of them cannot be watched.
func (p *Protocol) watchRemovalsOf(paths []string) removals {
	h := &p.watches
	all := &subscriptions{c: make(chan struct{}, 1)}
	h.mu.Lock()
	ok := true
	for _, path := range paths {
		s := h.subscribe(path, all.c)
		if s == nil {
			ok = false
			break
		}
		all.subs = append(all.subs, s)
	}
	h.mu.Unlock()
	if !ok {
		all.close() // takes h.mu
		return nil
	}
	return all
}

// subscriptions is one waiter's interest in several lock paths, signalled
// on one channel.
type subscriptions struct {
	subs []*subscription
	c    chan struct{}
}

func (a *subscriptions) C() <-chan struct{} { return a.c }

func (a *subscriptions) close() {
	for _, s := range a.subs {
		s.close()
	}
}

// subscribe adds a subscription to the removal of path signalled on c,
// with h.mu held; nil when inotify cannot watch it.
func (h *watchHub) subscribe(path string, c chan struct{}) *subscription {
	dir, name := filepath.Dir(path), filepath.Base(path)
	if h.ino == nil {
		ino, err := newInotify()
		if err != nil {
			return nil
		}
		h.ino = ino
		go h.read(ino)
	}
	ino := h.ino
	wd, ok := ino.dirs[dir]
	if !ok {
		w, err := unix.InotifyAddWatch(ino.fd, dir, watchMask)
		if err != nil {
			return nil
		}
		wd = int32(w)
		ino.dirs[dir] = wd
	}
	byName := ino.byWD[wd]
	if byName == nil {
		byName = make(map[string]map[*subscription]struct{})
		ino.byWD[wd] = byName
	}
	s := &subscription{hub: h, ino: ino, wd: wd, name: name, c: c}
	if byName[name] == nil {
		byName[name] = make(map[*subscription]struct{})
	}
	byName[name][s] = struct{}{}
	ino.subs++
	if ino.idle != nil {
		ino.idle.Stop()
		ino.idle = nil
	}
	return s
}

func newInotify() (*inotify, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &inotify{
		f:    os.NewFile(uintptr(fd), "inotify"),
		fd:   fd,
		dirs: make(map[string]int32),
		byWD: make(map[int32]map[string]map[*subscription]struct{}),
	}, nil
}

func (h *watchHub) unsubscribe(s *subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ino := s.ino
	if byName := ino.byWD[s.wd]; byName != nil {
		if set := byName[s.name]; set != nil {
			delete(set, s)
			if len(set) == 0 {
				delete(byName, s.name)
			}
		}
	}
	if byName := ino.byWD[s.wd]; len(byName) == 0 && !ino.closed {
		// Nobody waits on anything in this directory any more: drop its
		// watch (see hubIdle). The IN_IGNORED this causes finds no
		// subscribers and, the directory's entry being gone or already
		// another watch's, removes nothing else.
		delete(ino.byWD, s.wd)
		for dir, wd := range ino.dirs {
			if wd == s.wd {
				delete(ino.dirs, dir)
			}
		}
		unix.InotifyRmWatch(ino.fd, uint32(s.wd))
	}
	ino.subs--
	if ino.subs == 0 && !ino.closed && h.ino == ino {
		ino.idle = time.AfterFunc(hubIdle, func() { h.closeIfIdle(ino) })
	}
}

// closeIfIdle closes ino if still nobody waits on it; its reader then
// stops.
func (h *watchHub) closeIfIdle(ino *inotify) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ino.subs != 0 || ino.closed {
		return
	}
	ino.closed = true
	if h.ino == ino {
		h.ino = nil
	}
	ino.f.Close()
}

// read is ino's reader: it signals the subscribers of each removed or
// renamed entry, and everyone when the kernel dropped events.
func (h *watchHub) read(ino *inotify) {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := ino.f.Read(buf)
		if err != nil {
			if errors.Is(err, os.ErrClosed) {
				return
			}
			// Anything else: the instance is unusable. Wake everyone (they
			// poll from here on) and let the next waiter start afresh.
			h.fail(ino)
			return
		}
		h.dispatch(ino, buf[:n])
	}
}

func (h *watchHub) dispatch(ino *inotify, buf []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	eachEvent(buf, func(ev *unix.InotifyEvent, name string) {
		switch {
		case ev.Mask&unix.IN_Q_OVERFLOW != 0:
			ino.signalAll()
		case ev.Mask&unix.IN_IGNORED != 0:
			// The directory went away (or the watch was dropped): its
			// waiters fall back to their backoff.
			for _, set := range ino.byWD[ev.Wd] {
				for s := range set {
					s.signal()
				}
			}
			for dir, wd := range ino.dirs {
				if wd == ev.Wd {
					delete(ino.dirs, dir)
				}
			}
		case name != "":
			for s := range ino.byWD[ev.Wd][name] {
				s.signal()
			}
		}
	})
}

// eachEvent calls fn for each inotify event in buf, with the name it
// carries ("" for none), without its NUL padding.
func eachEvent(buf []byte, fn func(ev *unix.InotifyEvent, name string)) {
	for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		nameStart := off + unix.SizeofInotifyEvent
		off = nameStart + int(ev.Len)
		var name []byte
		if ev.Len > 0 && off <= len(buf) {
			name = buf[nameStart:off]
			for len(name) > 0 && name[len(name)-1] == 0 {
				name = name[:len(name)-1]
			}
		}
		fn(ev, string(name))
	}
}

func (ino *inotify) signalAll() {
	for _, byName := range ino.byWD {
		for _, set := range byName {
			for s := range set {
				s.signal()
			}
		}
	}
}

func (h *watchHub) fail(ino *inotify) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ino.signalAll()
	if h.ino == ino {
		h.ino = nil
	}
	if !ino.closed {
		ino.closed = true
		ino.f.Close()
	}
}
