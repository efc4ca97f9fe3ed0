package flock

import (
	"sync"
	"sync/atomic"
	"time"
)

// verified remembers lock files this process has read and found to be
// hold's with no live record in them (empty, or a past record), by
// identity and change time. An acquisition that finds the file unchanged
// since then (same device, inode, ctime and size from the statx the
// acquisition makes anyway) need not read it again: that read was a fifth
// system call on every acquisition. Any write to the file, by anyone,
// moves its ctime, and the check under the lock that licenses writing
// (publishLocked) never trusts this cache, so a stale entry can at worst
// delay the refusal of a derived path that became foreign to the first
// write attempt.
//
// It is per process because what this process has read is a fact about
// the process, like its pid; it is bounded, and simply emptied when full.
var verified = fileCache{max: 256}

type fileCache struct {
	max int
	mu  sync.Mutex
	m   map[fileKey]verifiedAs
	// gen counts the entries ever added: each entry carries the count
	// at its addition, and each lock file the count at its open, so that
	// hasBefore can tell an entry that predates an open.
	gen atomic.Uint64
}

// verifiedAs is what the cache knows of a file: its stamp when it was
// verified (with one link), and the generation of that entry.
type verifiedAs struct {
	stamp fileStamp
	gen   uint64
}

// has reports whether f is unchanged since it was verified.
func (c *fileCache) has(f *lockFile) bool {
	_, ok := c.lookup(f)
	return ok
}

// hasBefore reports whether f is unchanged since it was verified, and
// that verification came before f was opened (its stamp was taken
// before the open: see lockFile.replaced).
func (c *fileCache) hasBefore(f *lockFile) bool {
	gen, ok := c.lookup(f)
	return ok && gen <= f.openGen
}

// lookup returns the generation of f's entry, and whether f is unchanged
// since it was verified.
//
// The answer is kept in f (lockFile.known) until f is looked at again: an
// acquisition asks more than once (replaced, then judge) about the same
// look, and what was verified stays so, even if the cache is emptied
// meanwhile.
func (c *fileCache) lookup(f *lockFile) (gen uint64, ok bool) {
	if f.known.set {
		return f.known.gen, f.known.ok
	}
	st, ok := f.stamp()
	if !ok {
		return 0, false
	}
	c.mu.Lock()
	got, found := c.m[f.key()]
	c.mu.Unlock()
	ok = found && got.stamp == st
	f.known = cacheAnswer{gen: got.gen, ok: ok, set: true}
	return got.gen, ok
}

// cacheAnswer is the verified cache's answer about a lock file as of its
// last look (see lookup); set says there is one.
type cacheAnswer struct {
	gen     uint64
	ok, set bool
}

// generation is the count of entries added so far, which a lock file
// notes at its open.
func (c *fileCache) generation() uint64 { return c.gen.Load() }

// add remembers f as verified, as of its last look (identify or refresh).
func (c *fileCache) add(f *lockFile) {
	st, ok := f.stamp()
	if !ok {
		return
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= c.max {
		c.m = make(map[fileKey]verifiedAs)
	}
	gen := c.gen.Add(1)
	c.m[f.key()] = verifiedAs{st, gen}
	c.mu.Unlock()
	f.known = cacheAnswer{gen: gen, ok: true, set: true}
}

// lazy lists the exclusive holders of this process whose record is not
// written yet, by file. A waiter or Inspect in this process that finds
// such a lock busy has the holder write its record first, so that it can
// read it: within one process nobody ever sees a lazy holder as unknown.
// (Other processes name it by the kernel's pid until the timer writes it.)
//
// It also writes the records of holds that have lasted recordDelay, from
// one timer per process that runs only while some hold is listed, rather
// than a timer per hold, whose arming and stopping on every acquisition
// costs a noticeable share of the hand-offs (docs/bench.md), and that
// looks every lazyTick, not every recordDelay, for the same reason.
var lazy = holders{m: make(map[fileKey]*handle)}

type holders struct {
	mu    sync.Mutex
	m     map[fileKey]*handle
	timer procTimer   // runs tick while any hold is listed
	used  atomic.Bool // warm has been called
	// ticks counts tick's runs, which is what the timer costs (see
	// lazyTick).
	ticks atomic.Uint64
}

// warm reports whether this process has taken an exclusive kernel lock
// before. Its first one is written at once instead of lazily: the first
// timer a Go process arms starts the runtime's poller, which costs a
// one-lock process such as `hold run` (which reads the token at once
// anyway) more than the write it would put off. A process that takes
// locks in a loop writes only the first.
func (r *holders) warm() bool { return r.used.Swap(true) }

func (r *holders) add(h *handle) {
	r.mu.Lock()
	r.m[h.f.key()] = h
	r.timer.start(lazyTick, tickLazy)
	r.mu.Unlock()
}

// remove forgets h (not a newer holder of the same file).
func (r *holders) remove(h *handle) {
	r.mu.Lock()
	if r.m[h.f.key()] == h {
		delete(r.m, h.f.key())
	}
	r.mu.Unlock()
}

// tickLazy is lazy's timer's function: a function, not the method value
// lazy.tick, which would be made anew on every add.
func tickLazy() { lazy.tick() }

// tick writes the records of the holds that have lasted recordDelay, and
// runs again lazyTick later while any hold is listed. A hold is so written
// between recordDelay and recordDelay + lazyTick after it began (a look
// finds it younger than recordDelay at most once).
func (r *holders) tick() {
	r.ticks.Add(1)
	now := time.Now()
	var due []*handle
	r.mu.Lock()
	for _, h := range r.m {
		if now.Sub(h.since) >= recordDelay {
			due = append(due, h)
		}
	}
	r.timer.again(lazyTick, len(r.m) > len(due))
	r.mu.Unlock()
	// Outside r.mu: publishing takes the handle's lock, then r.mu.
	for _, h := range due {
		h.publishLate()
	}
}

// publish has the lazy holder of f in this process, if any, write its
// record now.
func (r *holders) publish(f *lockFile) {
	r.mu.Lock()
	h := r.m[f.key()]
	r.mu.Unlock()
	if h != nil {
		h.publishLate()
	}
}
