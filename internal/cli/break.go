package cli

import (
	"fmt"
	"os"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/internal/report"
)

func init() {
	register(&command{
		name:    "break",
		summary: "remove TARGET's portable (dir) lock when its holder is gone",
		usage:   "break [--force] [flags] TARGET",
		help: `
Removes a portable lock (a directory at TARGET.lock, made by hold --protocol
dir or by Node's proper-lockfile) whose holder is provably gone,
by the rules a waiter applies before taking a lock over: a dead holder on
this host at once; a holder that cannot be asked (no owner record, another
host) once its heartbeat is older than the stale time (HOLD_DIR_STALE,
default 10s). A live holder is refused, naming it (exit 1, or -E); --force
removes the lock anyway, after printing its record, and that holder then
finds its lock lost. The removed lock's record is printed first either way.

Kernel locks (the default protocol) cannot be broken: the kernel frees them
when their holder dies (exit 65).

Exit status: 0 when the lock was removed or there was none, 1 (or -E) when
a live holder was refused, 65 for a kernel lock.`,
		run: runBreak,
	})
}

func runBreak(args []string) int {
	fs := newFlagSet("break", true)
	var lf lockFlags
	lf.addTo(fs)
	// Only the flags that say where the lock is (and -E) apply to break.
	fs = withoutFlags(fs, true, waitFlags...)
	force := fs.Bool("force", false, "remove the lock even if its holder is alive, after printing its record")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	if fs.NArg() > 1 {
		return fail("break", usagef("expected one TARGET, got %d", fs.NArg()), lf.conflictExit)
	}
	spec, err := lf.resolve(fs.Arg(0))
	if err != nil {
		return fail("break", err, lf.conflictExit)
	}
	defer spec.Close()
	// Show what is about to be removed (and what --force overrides).
	if st, err := lockspec.InspectAny(spec.Target, spec.Opts...); err == nil && st.State != hold.Free &&
		(*force || st.State == hold.Stale) {
		printStatus(os.Stdout, report.NewStatus(spec.Target, st))
	}
	st, err := hold.Break(spec.Target, *force, spec.Opts...)
	if err != nil {
		return fail("break", err, lf.conflictExit)
	}
	if st.State == hold.Free {
		fmt.Printf("%s: no lock, nothing to break\n", st.Path)
		return 0
	}
	fmt.Printf("%s: removed\n", st.Path)
	return 0
}
