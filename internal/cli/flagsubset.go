package cli

import (
	"fmt"
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
			// flock(1)'s -e for -x: kept with the flag, or update -e
			// would be an unknown flag.
			for _, alias := range fs.ShorthandAliases(f.Name) {
				kept.AliasShorthand(alias, f.Name)
			}
		}
	})
	return kept
}

// waitFlags are the lock flags about taking a lock and waiting for it,
// which mean nothing to a command that only looks at a lock.
var waitFlags = []string{"nonblock", "nb", "wait", "timeout", "shared", "exclusive", "verbose", "quiet", "field", "fair", "make-dirs", "deadlock-after"}

// exclusiveOnly drops from fs, the flag set of update or append (op), the
// lock flags that would let another holder in beside it, and refuses
// them with why (exit 64), so that a user who types one learns what it
// would have cost rather than that hold does not know it. Both commands
// read or write FILE on the assumption that no other writer is at work
// while they hold its lock: a shared lock (-s) lets every other reader and
// writer of the lock in too, and one of N slots (--slots N) lets N-1 more,
// and then two updates read the same old content and one change is lost,
// or an append cut back after a failed write removes another's record.
// They were accepted once, and 20 parallel `hold update --slots 4`
// increments left 5 (issue 53).
func exclusiveOnly(fs *gnuflag.FlagSet, op string) *gnuflag.FlagSet {
	kept := withoutFlags(fs, false, "shared", "slots")
	var lost string
	switch op {
	case "update":
		lost = "two updates would read the same old content and one change would be lost"
	default:
		lost = "appenders would write at once, and one cut back after a failed write would remove another's record"
	}
	kept.Refuse("shared", "s", fmt.Sprintf("a shared lock lets other holders of FILE's lock in beside this one, and %s. "+
		"Leave -s out: %s always takes the lock exclusively (readers holding it with -s wait for it, and it for them)", lost, op))
	kept.Refuse("slots", "", fmt.Sprintf("one of N slots lets N-1 other holders of FILE's lock in beside this one, and %s. "+
		"Leave --slots out: %s always takes the whole lock, alone", lost, op))
	return kept
}
