package cli

import (
	"slices"
	"strings"

	"github.com/hold-dev/hold/internal/gnuflag"
)

// withoutFlags returns a flag set of the same command holding every flag
// of fs but the named ones, for a subcommand to which some of the shared
// lock flags do not apply (status does not wait, update cannot share).
// Hiding a flag would leave it accepted but unlisted; dropping it makes
// `hold CMD --help` list exactly what CMD accepts, and a dropped flag an
// unknown one (exit 64). The flags themselves are shared with fs, so the
// values a lockFlags bound to fs reads, and fs.Changed, see the parse.
// interspersed is as for newFlagSet.
func withoutFlags(fs *gnuflag.FlagSet, interspersed bool, names ...string) *gnuflag.FlagSet {
	kept := newFlagSet(strings.TrimPrefix(fs.Name(), "hold "), interspersed)
	fs.VisitAll(func(f *gnuflag.Flag) {
		if !slices.Contains(names, f.Name) {
			kept.AddFlag(f)
		}
	})
	return kept
}

// waitFlags are the lock flags about taking a lock and waiting for it,
// which mean nothing to a command that only looks at a lock.
var waitFlags = []string{"nonblock", "nb", "wait", "timeout", "shared", "exclusive", "verbose", "quiet", "field", "fair", "make-dirs", "deadlock-after"}
