package dirlock

import (
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// watchHub is empty on Windows: each waiter has its own fsnotify watcher
// (ReadDirectoryChangesW) on the lock's parent directory.
type watchHub struct{}

// fsWatch adapts an fsnotify watcher to removals: a goroutine passes on
// the removal or renaming of the lock path and drops everything else.
type fsWatch struct {
	w *fsnotify.Watcher
	c chan struct{}
}

func (p *Protocol) watchRemovals(path string) removals {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil
	}
	if err := fw.Add(filepath.Dir(path)); err != nil {
		fw.Close()
		return nil
	}
	w := &fsWatch{w: fw, c: make(chan struct{}, 1)}
	base := filepath.Base(path)
	go func() {
		events, errs := fw.Events, fw.Errors
		for events != nil || errs != nil {
			select {
			case ev, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				if ev.Has(fsnotify.Remove|fsnotify.Rename) && filepath.Base(ev.Name) == base {
					w.signal()
				}
			case _, ok := <-errs:
				if !ok {
					errs = nil
					continue
				}
				// An overflowed event queue may have dropped the one we
				// wait for: look now.
				w.signal()
			}
		}
	}()
	return w
}

func (w *fsWatch) C() <-chan struct{} { return w.c }

func (w *fsWatch) signal() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// close does not wait: closing a watcher waits for its reader goroutine,
// which can take tens of milliseconds under load, and the new holder
// need not wait for that.
func (w *fsWatch) close() { go w.w.Close() }
