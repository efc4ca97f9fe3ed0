package cli

import (
	"github.com/hold-dev/hold/internal/lockspec"
)

// The network backends live in companion executables (hold-remote,
// hold-postgres; see lockspec's hand-off), which are this package's
// command with backends registered through the functions below.

// SchemeResolver turns an address-style target ("etcd://host:port/key")
// into the protocol serving it and the lock path (or key) within it; it
// reads the connection settings from the request.
type SchemeResolver = lockspec.SchemeResolver

// RegisterScheme makes targets of the form "SCHEME://..." resolve through
// r. hold-remote calls it from init functions for its backends.
func RegisterScheme(scheme string, r SchemeResolver) { lockspec.RegisterScheme(scheme, r) }

// RegisterListScheme makes `hold ls SCHEME://...` resolve through r, which
// returns a protocol that can list its locks and the prefix of the names
// to list. Schemes without one list through their RegisterScheme resolver.
func RegisterListScheme(scheme string, r SchemeResolver) {
	lockspec.RegisterListScheme(scheme, r)
}

// Usagef returns a usage error (exit 64), for resolvers outside this
// package.
func Usagef(format string, args ...any) error { return usagef(format, args...) }
