//go:build !unix

package proc

// ReadyRuntime has nothing to prepare where there is no per-process
// descriptor limit for the runtime's poller to run into (Windows).
func ReadyRuntime() error { return nil }
