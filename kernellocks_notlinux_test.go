//go:build !linux

package hold_test

// kernelLocks cannot ask the kernel outside Linux; the tests then fall
// back to giving a waiter time to block.
func kernelLocks(path string) (holders, waiters []int, ok bool) { return nil, nil, false }
