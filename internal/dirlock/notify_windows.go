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
	return p.watchRemovalsOf([]string{path})
}

// watchRemovalsOf watches for the removal of any of paths, which are all
// in one directory (a semaphore's slots).
func (p *Protocol) watchRemovalsOf(paths []string) removals {
	if len(paths) == 0 {
		return nil
	}
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil
	}
	if err := fw.Add(filepath.Dir(paths[0])); err != nil {
		fw.Close()
		return nil
	}
	w := &fsWatch{w: fw, c: make(chan struct{}, 1)}
	names := make(map[string]bool, len(paths))
	for _, path := range paths {
		names[filepath.Base(path)] = true
	}
	go func() {
		events, errs := fw.Events, fw.Errors
		for events != nil || errs != nil {
			select {
			case ev, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				if ev.Has(fsnotify.Remove|fsnotify.Rename) && names[filepath.Base(ev.Name)] {
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
