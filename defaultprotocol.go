package hold

import "github.com/hold-dev/hold/internal/flock"

// DefaultProtocol returns the protocol Acquire and the other entry points
// use when no WithProtocol option is given: the kernel lock (flock(2) on
// unix, LockFileEx on Windows), whose Name is "flock". A program that lets
// its users choose a protocol by name (hold's --protocol and
// HOLD_PROTOCOL) lists this one beside the others; passing it to
// WithProtocol changes nothing.
func DefaultProtocol() Protocol { return flock.Protocol{} }
