package doctor

import (
	"sync"

	"github.com/fsnotify/fsnotify"
)

// Watcher reports removals inside one directory.
type Watcher interface {
	// Removed delivers the path of each entry removed from the directory.
	Removed() <-chan string
	// Close stops watching.
	Close() error
}

// fsWatcher is a Watcher on fsnotify: inotify on Linux, kqueue on the
// BSDs and macOS, ReadDirectoryChangesW on Windows — the mechanism the
// portable protocol's waiters use to wake when a lock directory goes.
type fsWatcher struct {
	w       *fsnotify.Watcher
	removed chan string
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// watchDir starts watching dir.
func watchDir(dir string) (Watcher, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, err
	}
	fw := &fsWatcher{w: w, removed: make(chan string, 16), stop: make(chan struct{})}
	fw.wg.Add(1)
	go fw.forward()
	return fw, nil
}

func (fw *fsWatcher) forward() {
	defer fw.wg.Done()
	for {
		select {
		case ev, ok := <-fw.w.Events:
			if !ok {
				return
			}
			if ev.Has(fsnotify.Remove) {
				select {
				case fw.removed <- ev.Name:
				case <-fw.stop:
					return
				}
			}
		case _, ok := <-fw.w.Errors:
			if !ok {
				return
			}
		case <-fw.stop:
			return
		}
	}
}

func (fw *fsWatcher) Removed() <-chan string { return fw.removed }

func (fw *fsWatcher) Close() error {
	var err error
	fw.once.Do(func() {
		close(fw.stop)
		err = fw.w.Close()
		fw.wg.Wait()
	})
	return err
}
