package cli

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/gnuflag"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// fdFormHelp is the synopsis of the descriptor form, for its errors.
const fdFormHelp = "hold run [-s|-x|-u] [-n|-w SECONDS] [-E N] [-q|--verbose] FD"

// descriptorForm reports whether what follows run's flags is flock(1)'s
// descriptor form, `flock -n 9`: a lone number, no command. (A lone word
// that is not a number is a TARGET whose command is missing.)
func descriptorForm(rest []string, argsBeforeDash int, shellSet bool) (int, bool) {
	if len(rest) != 1 || argsBeforeDash >= 0 || shellSet {
		return 0, false
	}
	fd, err := strconv.Atoi(rest[0])
	if err != nil || fd < 0 || strconv.Itoa(fd) != rest[0] {
		return 0, false
	}
	return fd, true
}

// fdFlagsThatDoNotApply are run's flags that mean nothing for a descriptor
// the shell opened: there is no lock path to choose, no protocol but
// flock(2), no record, and no command.
var fdFlagsThatDoNotApply = []string{"lock-file", "name", "fair", "field", "close", "no-fork", "command", "make-dirs", "deadlock-after"}

// runDescriptor is `hold run [flags] FD`: one flock(2) on descriptor fd,
// which hold inherited from the shell (exec 9>>FILE), as flock(1) makes it.
// The lock belongs to the shell's open file, so it stays held after hold
// exits, until the shell closes the descriptor or runs hold run -u FD.
func runDescriptor(fd int, lf *lockFlags, fs *gnuflag.FlagSet, unlock bool) int {
	var bad []string
	fs.VisitAll(func(f *gnuflag.Flag) {
		if !f.Changed {
			return
		}
		for _, n := range fdFlagsThatDoNotApply {
			if f.Name == n {
				bad = append(bad, "--"+n)
			}
		}
		for _, st := range lockspec.RemoteSettings {
			if f.Name == st.Flag {
				bad = append(bad, "--"+f.Name)
			}
		}
	})
	if fs.Changed("protocol") && lf.protocol != lockspec.DefaultProtocol {
		bad = append(bad, "--protocol "+lf.protocol)
	}
	if len(bad) > 0 {
		return fail("run", usagef("%s does not apply to a descriptor, which is locked with flock(2) as flock(1) locks it: %s", bad[0], fdFormHelp), lf.conflictExit)
	}
	s := lf.spec(strconv.Itoa(fd))
	if err := s.Check(); err != nil {
		return fail("run", err, lf.conflictExit)
	}
	quietConflict = !(&lockspec.Resolved{Verbose: lf.verbose, Quiet: lf.quiet}).Tells(os.Stderr)
	if unlock {
		if err := flock.UnlockFD(fd, os.Getppid()); err != nil {
			return fail("run", err, lf.conflictExit)
		}
		return 0
	}
	ctx := context.Background()
	nonblock := s.Nonblock || s.WaitGiven && s.Wait <= 0
	if s.WaitGiven && !nonblock {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Wait)
		defer cancel()
	}
	start := time.Now()
	// The lock is kept by the process that lent hold the descriptor, its
	// parent: the record names that one (hold exits at once).
	var keeper *lock.Owner
	if o, ok := proc.Parent(); ok && !s.Shared {
		keeper = &o
	}
	if err := flock.LockFD(ctx, fd, s.Shared, nonblock, keeper); err != nil {
		return fail("run", err, lf.conflictExit)
	}
	if lf.verbose {
		fmt.Fprintf(os.Stderr, "hold: locked descriptor %d (%s) after %s\n", fd, modeName(s.Shared), lockspec.RoundDuration(time.Since(start)))
	}
	return 0
}

// checkRunForm refuses the flags that do not go with running a command.
func checkRunForm(lf *lockFlags, noFork, closeFD, unlock bool) error {
	switch {
	case unlock:
		return usagef("-u/--unlock drops the lock of a descriptor the shell opened: hold run -u FD; the lock hold run takes for a command is dropped when the command exits")
	case noFork && closeFD:
		return usagef("--no-fork and --close exclude each other: with -F the command takes hold's place and keeps the lock's descriptor")
	case noFork && lf.fair:
		return usagef("--no-fork does not go with --fair: the fair queue's place is kept by hold, which -F replaces with the command")
	case noFork && lf.protocol != lockspec.DefaultProtocol:
		return usagef("--no-fork needs the kernel lock (--protocol %s): a %s lock is kept by hold, which -F replaces with the command", lockspec.DefaultProtocol, lf.protocol)
	}
	return nil
}

func modeName(shared bool) string {
	if shared {
		return "shared"
	}
	return "exclusive"
}
