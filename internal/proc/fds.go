package proc

import "github.com/hold-dev/hold/lock"

// ReadyForLock is ReadyRuntime for an operation op on the lock at path,
// with its failure as that operation's error. Call it before the first
// file of a lock is opened or made by code that goes on to arm a timer
// (a wait, a heartbeat), so that running out of descriptors is an error
// that leaves nothing behind, never a runtime dump halfway through.
func ReadyForLock(op, path string) error {
	if err := ReadyRuntime(); err != nil {
		return &lock.Error{Op: op, Path: path, Err: err,
			Hint: "no file descriptor is left for hold; nothing was created. Raise the limit (ulimit -n) and try again"}
	}
	return nil
}
