package flock

import (
	"sync"
	"time"

	"github.com/hold-dev/hold/internal/proc"
)

// The watch for lost kernel locks, behind Lost.
//
// A kernel lock cannot be taken away: the kernel keeps it while the
// descriptor is open. It stops guarding anything only when its lock file
// is removed or replaced (rm, a temp cleaner, a rename over it), because
// newcomers then lock the file the path names now, and only a look at the
// path shows that (Check's test, one stat). So the holds someone watches
// are looked at periodically, and Lost closes when a look finds the path
// naming another file or none.
//
// The watch costs a hold nobody watches nothing: a hold joins it on its
// first Lost call and leaves it on Release, so the uncontended Acquire and
// Release make no goroutine, timer or allocation for it. The looks come
// from one timer per process (a procTimer), running only while some hold
// is watched, rather than a timer or a goroutine per hold, which a process
// with many short holds (the agent) would pay for on every one.

// lossPoll is how often a watched hold's lock file is looked at. A
// second, as `hold run` and the agent looked before the watch moved here:
// the loss is a fault (someone removed a file they should not have), not
// a race a faster look could close, since the newcomer that locks the new
// file does so the moment it appears; what the period bounds is how long
// the old holder goes on unaware, and a second is short next to the
// grace period `hold run` then gives its command, while one stat per
// watched hold per second costs nothing noticeable.
const lossPoll = time.Second

// watch lists the holds of this process whose Lost was asked for and
// that are neither released nor found lost yet. A watched hold that is
// never released stays listed, and so held, until the process ends: a
// lock must be released, never left to the garbage collector.
var watch = watchList{m: make(map[*handle]struct{})}

type watchList struct {
	mu    sync.Mutex
	m     map[*handle]struct{}
	timer procTimer // runs look while any hold is watched
	batch []*handle // the look's copy of m, kept for the next one
}

// add watches h, starting the timer if it is not running. It reports
// false, and watches nothing, when the runtime cannot arm a timer for
// want of descriptors (see proc.ReadyRuntime): the loss is then found by
// Check alone, as before the watch, rather than the process being
// aborted by the runtime.
func (w *watchList) add(h *handle) bool {
	if proc.ReadyRuntime() != nil {
		return false
	}
	w.mu.Lock()
	w.m[h] = struct{}{}
	w.timer.start(lossPoll, lookWatched)
	w.mu.Unlock()
	return true
}

// remove stops watching h. The timer runs on until its next look finds
// nothing to watch: stopping it here would cost every release of a
// watched hold a timer operation, for one idle wake-up saved.
func (w *watchList) remove(h *handle) {
	w.mu.Lock()
	delete(w.m, h)
	w.mu.Unlock()
}

// lookWatched is watch's timer's function (a function, not the method
// value watch.look, which would be made anew on every add).
func lookWatched() { watch.look() }

// look runs Check's test on every watched hold, which marks a lost one
// lost and closes its Lost channel, and sets the timer again while any
// hold is watched. The next look is timed from the end of this one, so
// that a stat stuck in a hung filesystem holds up the looks rather than
// piling them up. Looks never overlap, so batch is look's alone.
func (w *watchList) look() {
	w.mu.Lock()
	batch := w.batch[:0]
	for h := range w.m {
		batch = append(batch, h)
	}
	w.mu.Unlock()
	// Outside w.mu: Check takes the handle's lock, and Lost and Release
	// take w.mu under it.
	for i, h := range batch {
		if h.Check() != nil {
			// Lost, or released meanwhile: either way there is
			// nothing more to watch.
			w.remove(h)
		}
		batch[i] = nil // hold no released handle until the next look
	}
	w.mu.Lock()
	w.batch = batch[:0]
	w.timer.again(lossPoll, len(w.m) > 0)
	w.mu.Unlock()
}
