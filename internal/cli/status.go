package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/core"
	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/lock"
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

Exit status: 0 when every TARGET could be inspected, else the status of the
last failure (66: cannot open, e.g. a symlink or FIFO at the lock path). A
directory at the lock path is reported as a portable-protocol lock.`,
		run: runStatus,
	})
}

// statusReport is what status prints for one target; its JSON form is the
// --json output.
type statusReport struct {
	Target   string `json:"target,omitempty"`
	Path     string `json:"lock_file"`
	Protocol string `json:"protocol"`
	// State is "free", "held exclusive", "held shared" or "stale".
	State string `json:"state"`
	Held  bool   `json:"held"`
	// Token is the last fencing token handed out on this lock.
	Token uint64 `json:"token"`
	// Holder is the owner record (for a free lock: the last holder's).
	Holder *holderReport `json:"holder,omitempty"`
	// KernelPIDs are the pids the kernel lists for the lock (Linux).
	KernelPIDs []int `json:"kernel_pids,omitempty"`
	// Openers are the processes that have the lock file open, looked up
	// when the recorded holder is dead but the lock is held (Linux).
	Openers []opener `json:"openers,omitempty"`
	// Note explains a surprising state.
	Note string `json:"note,omitempty"`
	// Judged says what decided a portable lock's state: the holder's
	// liveness on this host, or, for a holder on another host or without
	// a record, its heartbeat's age.
	Judged string `json:"judged,omitempty"`
}

type holderReport struct {
	PID         int               `json:"pid"`
	Host        string            `json:"host,omitempty"`
	Alive       string            `json:"alive"`
	Command     []string          `json:"command,omitempty"`
	StartedAt   *time.Time        `json:"started_at,omitempty"`
	HeldSeconds float64           `json:"held_seconds,omitempty"`
	Shared      bool              `json:"shared,omitempty"`
	Fields      map[string]string `json:"fields,omitempty"`
}

// opener is a process that has the lock file open.
type opener struct {
	PID     int    `json:"pid"`
	Command string `json:"command,omitempty"`
}

func runStatus(args []string) int {
	fs := newFlagSet("status", true)
	var lf lockFlags
	lf.addTo(fs)
	// Only the flags that say where the lock is apply to status.
	fs = withoutFlags(fs, true, append(waitFlags, "conflict-exit-code")...)
	asJSON := fs.Bool("json", false, "print one JSON object per TARGET")
	if code, done := parseFlags(fs, args); done {
		return code
	}
	targets := fs.Args()
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
	code := 0
	for _, target := range targets {
		r, err := inspectTarget(&lf, target)
		if err != nil {
			code = fail("status", err, exitLockError)
			continue
		}
		if *asJSON {
			b, _ := json.Marshal(r)
			fmt.Printf("%s\n", b)
		} else {
			printStatus(os.Stdout, r)
		}
	}
	return code
}

func inspectTarget(lf *lockFlags, target string) (*statusReport, error) {
	spec, err := lf.resolve(target)
	if err != nil {
		return nil, err
	}
	defer spec.Close()
	st, err := spec.Inspect()
	if err != nil {
		return nil, err
	}
	r := newStatusReport(target, st)
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
		proto = hold.Portable()
	}
	if d, ok := proto.(lock.Describer); ok {
		return d.Describe(st.Path)
	}
	return ""
}

func newStatusReport(target string, st *hold.Status) *statusReport {
	r := &statusReport{
		Target:   core.RedactURL(target),
		Path:     st.Path,
		Protocol: st.Protocol,
		State:    st.State.String(),
		Held:     st.State == hold.HeldExclusive || st.State == hold.HeldShared,
		Token:    st.Fence,
	}
	h := st.Holder
	if h == nil {
		return r
	}
	if !r.Held && h.Owner != nil && h.Owner.Released && h.Owner.PID == 0 {
		// A kernel lock's released record keeps only the last token for
		// the next holder and names nobody (no pid, no command): there
		// is no last holder to show.
		return r
	}
	r.KernelPIDs = h.PIDs
	r.Holder = newHolderReport(h, r.Held)
	if !r.Held {
		return r
	}
	recordedDead := h.Owner != nil && h.Alive == hold.Dead
	kernel := st.Protocol == "flock"
	if kernel && (recordedDead || h.Owner == nil) {
		r.Openers = openersOf(st.Path)
	}
	switch {
	case recordedDead && st.Protocol == "etcd":
		r.Note = fmt.Sprintf("the recorded holder (pid %d) is dead; the lock stays held until its lease expires (or `hold break` revokes it)", h.Owner.PID)
	case recordedDead && kernel:
		r.Note = fmt.Sprintf("the recorded holder (pid %d) is dead, but the lock is still held: "+
			"a process that inherited its descriptor has it (the command of a killed 'hold run', or a process it started)", h.Owner.PID)
	case h.Owner == nil && st.Protocol == "dir":
		r.Note = "no owner.json: the holder is not hold (proper-lockfile, for one) or has not written it yet; it is judged by the directory's age"
	case h.Owner == nil && st.State == hold.HeldShared && kernel:
		// A lock file has room for one record, and readers share the
		// lock, so no shared holder writes one, hold's included.
		r.Note = "shared holders write no owner record, hold's own included"
		if len(h.PIDs) > 0 {
			r.Note += "; the kernel names the holders above"
		}
	case h.Owner == nil:
		r.Note = "no owner record: the holder is another tool (flock(1), for one), a hold that has not written its record yet " +
			"(it does once it has held the lock for 10-20 ms or is asked for its token), or one that could not write it"
	case len(h.PIDs) > 0 && !slices.Contains(h.PIDs, h.Owner.PID):
		r.Note = fmt.Sprintf("the kernel names pid %s as the holder, not the recorded pid %d", joinPIDs(h.PIDs), h.Owner.PID)
	}
	return r
}

// newHolderReport describes h's owner record (nil without one); held says
// whether the lock is held now, so that the time held means something.
func newHolderReport(h *hold.Holder, held bool) *holderReport {
	o := h.Owner
	if o == nil {
		return nil
	}
	hr := &holderReport{PID: o.PID, Host: o.Host, Alive: h.Alive.String(), Command: o.Command,
		Shared: o.Shared, Fields: o.Fields}
	if !o.StartedAt.IsZero() {
		t := o.StartedAt
		hr.StartedAt = &t
		if held {
			hr.HeldSeconds = lockspec.RoundDuration(o.Held(time.Now())).Seconds()
		}
	}
	return hr
}

func printStatus(w io.Writer, r *statusReport) {
	name := r.Path
	if r.Target != "" && r.Target+".lock" != r.Path {
		name = fmt.Sprintf("%s (%s)", r.Path, r.Target)
	}
	fmt.Fprintf(w, "%s: %s\n", name, r.State)
	fmt.Fprintf(w, "  protocol:  %s\n", r.Protocol)
	if h := r.Holder; h != nil {
		who := "holder"
		if !r.Held {
			who = "last holder"
		}
		line := fmt.Sprintf("pid %d", h.PID)
		if h.Host != "" {
			line += " on host " + h.Host
		}
		if r.Held || h.Alive == "alive" {
			line += ", " + h.Alive
		}
		fmt.Fprintf(w, "  %-10s %s\n", who+":", line)
		if len(h.Command) > 0 {
			fmt.Fprintf(w, "  command:   %s\n", strings.Join(h.Command, " "))
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
	if len(r.KernelPIDs) > 0 {
		fmt.Fprintf(w, "  kernel:    lock taken by pid %s\n", joinPIDs(r.KernelPIDs))
	}
	for _, o := range r.Openers {
		fmt.Fprintf(w, "  open by:   pid %d (%s)\n", o.PID, o.Command)
	}
	fmt.Fprintf(w, "  token:     %d\n", r.Token)
	if r.Judged != "" {
		fmt.Fprintf(w, "  judged:    %s\n", r.Judged)
	}
	if r.Note != "" {
		fmt.Fprintf(w, "  note:      %s\n", r.Note)
	}
}

func joinPIDs(pids []int) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ", ")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
