package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/dirlock"
	"github.com/hold-dev/hold/internal/fairq"
	"github.com/hold-dev/hold/internal/lockpath"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/internal/report"
	"github.com/hold-dev/hold/lock"
	"github.com/hold-dev/hold/portable"
)

func init() {
	register(&command{
		name:    "status",
		summary: "show whether TARGET's lock is free or held, by whom, and its fencing token",
		usage:   "status [--json] [flags] TARGET...",
		help: `
The state (free, held exclusive, held shared) comes from the lock itself (a
non-blocking probe), never from the recorded pid alone. When the recorded
holder is dead but the lock is still held, some process inherited the lock's
descriptor (the command of a killed 'hold run', or a daemon it started):
status says so and, on Linux, names the processes that have the lock file
open. Nothing is created or changed. With --json, one JSON object per
TARGET is printed per line.

Exit status answers "is it held?", as systemctl is-active answers "is it
active?": 0 when every TARGET is held (exclusive or shared, by anyone), 1
when some TARGET is free (or stale: its holder is gone), so a script asks
'if hold status T; then ...' without parsing --json. A TARGET that cannot
be inspected gives the status of the last such failure instead (66:
cannot open, e.g. a symlink or FIFO at the lock path, or a directory that
does not exist, which no lock can be in). A directory at the lock path is
reported as a portable-protocol lock.`,
		run: runStatus,
	})
}

func runStatus(args []string) int {
	fs := newFlagSet("status", true)
	var lf lockFlags
	lf.addTo(fs)
	// Only the flags that say where the lock is apply to status.
	fs = withoutFlags(fs, true, append(waitFlags, "conflict-exit-code")...)
	// Status takes nothing: a semaphore's N is read from its files, and
	// --slots is accepted only so that hold run's flags work here too.
	fs.Lookup("slots").Usage = "accepted as hold run takes it, and ignored: status reads a semaphore's `N` from its files"
	asJSON := fs.Bool("json", false, "print one JSON object per TARGET")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	targets := fs.Args()
	if err := lf.checkEmpty(); err != nil {
		return fail("status", err, exitConflict)
	}
	if len(targets) == 0 {
		if lf.lockFile == "" && lf.name == "" {
			return fail("status", usagef("no TARGET given"), exitConflict)
		}
		targets = []string{""}
	}
	// Hand a network target over before anything is printed, so that
	// hold-remote reports every target in order.
	if err := lockspec.HandOffIfRemote(targets...); err != nil {
		return fail("status", err, exitConflict)
	}
	code, free := 0, false
	for _, target := range targets {
		r, err := inspectTarget(&lf, target)
		if err != nil {
			code = fail("status", err, exitLockError)
			continue
		}
		free = free || !r.Held
		if *asJSON {
			b, _ := json.Marshal(r)
			fmt.Printf("%s\n", b)
		} else {
			printStatus(os.Stdout, r)
		}
	}
	if code == 0 && free {
		return exitStatusFree
	}
	return code
}

func inspectTarget(lf *lockFlags, target string) (*report.Status, error) {
	spec, err := lf.resolve(target)
	if err != nil {
		return nil, err
	}
	defer spec.Close()
	st, err := spec.Inspect()
	if err != nil {
		return nil, err
	}
	r := report.NewStatus(target, st)
	if r.Held || st.State == hold.Stale {
		r.Judged = portableJudgement(spec.Proto, st)
	}
	return r, nil
}

// portableJudgement explains what decided the state of a portable lock
// (see dirlock's Describe), with the protocol the flags chose when it is
// the portable one (its HOLD_DIR_* timings), and "" for other locks.
func portableJudgement(proto hold.Protocol, st *hold.Status) string {
	if st.Protocol != "dir" {
		return ""
	}
	if proto == nil || proto.Name() != "dir" {
		proto = portable.New()
	}
	if d, ok := proto.(lock.Describer); ok {
		return d.Describe(st.Path)
	}
	return ""
}

func printStatus(w io.Writer, r *report.Status) {
	name := r.Path
	if r.Target != "" && !lockpath.Serves(r.Target, r.Path) {
		name = fmt.Sprintf("%s (%s)", r.Path, r.Target)
	}
	if r.Slots > 0 {
		printSemaphore(w, name, r)
		return
	}
	fmt.Fprintf(w, "%s: %s\n", name, r.State)
	fmt.Fprintf(w, "  protocol:  %s\n", protocolLine(r))
	if h := r.Holder; h != nil {
		who := "holder"
		if !r.Held {
			who = "last holder"
		}
		line := fmt.Sprintf("pid %d", h.PID)
		if h.Host != "" {
			line += " on host " + h.Host
		}
		if r.Held || h.Liveness() == "alive" {
			line += ", " + h.Liveness()
		}
		fmt.Fprintf(w, "  %-10s %s\n", who+":", line)
		if len(h.Command) > 0 {
			fmt.Fprintf(w, "  command:   %s\n", h.CommandLine())
		}
		if h.StartedAt != nil {
			since := h.StartedAt.Local().Format(time.RFC3339)
			if r.Held {
				since += fmt.Sprintf(" (%s ago)", lockspec.RoundDuration(time.Since(*h.StartedAt)))
			}
			fmt.Fprintf(w, "  since:     %s\n", since)
		}
		for _, k := range sortedKeys(h.Fields) {
			fmt.Fprintf(w, "  %-10s %s\n", k+":", h.Fields[k])
		}
	}
	// The kernel's pids, less the holder's, said above already: each pid
	// is listed once.
	kernel, also := r.KernelPIDs, ""
	if h := r.Holder; h != nil && r.Held && slices.Contains(kernel, h.PID) {
		kernel = slices.DeleteFunc(slices.Clone(kernel), func(pid int) bool { return pid == h.PID })
		also = "also "
	}
	if len(kernel) > 0 {
		fmt.Fprintf(w, "  kernel:    lock %skept by pid %s\n", also, report.JoinPIDs(kernel))
	}
	for _, o := range r.Openers {
		fmt.Fprintf(w, "  open by:   pid %d (%s)\n", o.PID, report.OneLine(o.Command))
	}
	switch {
	case r.Held:
		fmt.Fprintf(w, "  token:     %d\n", r.Token)
	case r.Token > 0:
		// Free: the token is the last one given, not anyone's now.
		fmt.Fprintf(w, "  last token: %d\n", r.Token)
	default:
		fmt.Fprintf(w, "  last token: none kept\n")
	}
	if r.Judged != "" {
		fmt.Fprintf(w, "  judged:    %s\n", r.Judged)
	}
	if r.Note != "" {
		fmt.Fprintf(w, "  note:      %s\n", r.Note)
	}
}

// protocolLine is the protocol of a lock as status says it. A free lock
// with nothing at its path is in no protocol: the one named is the one it
// would be taken with (the flags', or the default), and a portable lock,
// whose directory goes when it is released, is told by its waiting gate's
// queue, which stays beside it.
func protocolLine(r *report.Status) string {
	if r.Held {
		return r.Protocol
	}
	if _, err := os.Lstat(r.Path); !errors.Is(err, fs.ErrNotExist) {
		return r.Protocol
	}
	if _, err := os.Lstat(r.Path + dirlock.GateSuffix + fairq.QueueFileSuffix); err == nil {
		return "dir (free: a portable lock's directory is gone once released)"
	}
	return r.Protocol + " (nothing at the lock path: the protocol it would be taken with)"
}

// printSemaphore is printStatus for a semaphore: how many slots are held,
// then each slot and its holder.
func printSemaphore(w io.Writer, name string, r *report.Status) {
	fmt.Fprintf(w, "%s: semaphore, %s\n", name, r.SemaphoreState())
	fmt.Fprintf(w, "  protocol:  %s\n", r.Protocol)
	fmt.Fprintf(w, "  slots:     %d\n", r.Slots)
	for _, s := range r.SlotHolders {
		line := "free"
		switch h := s.Holder; {
		case h != nil:
			line = fmt.Sprintf("pid %d", h.PID)
			if h.Host != "" {
				line += " on host " + h.Host
			}
			if len(h.Command) > 0 {
				line += " (" + h.CommandLine() + ")"
			}
			if h.StartedAt != nil {
				line += fmt.Sprintf(" for %s", lockspec.RoundDuration(time.Since(*h.StartedAt)))
			}
			line += ", " + h.Liveness()
		case s.Held && len(s.KernelPIDs) > 0:
			line = "kept by pid " + report.JoinPIDs(s.KernelPIDs) + " (no owner record: flock(1), or another tool)"
		case s.Held:
			line = "held, by a holder that wrote no owner record (flock(1), or another tool)"
		}
		fmt.Fprintf(w, "  slot %-5s %s\n", strconv.Itoa(s.Slot)+":", line)
	}
	fmt.Fprintf(w, "  token:     %d\n", r.Token)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
