//go:build !linux && !windows

package dirlock

// watchHub is empty where directory events are not used (see eventsWork).
type watchHub struct{}

// watchRemovals: no events here; waiters poll with backoff.
func (p *Protocol) watchRemovals(path string) removals { return nil }

// watchRemovalsOf: no events here either.
func (p *Protocol) watchRemovalsOf(paths []string) removals { return nil }
