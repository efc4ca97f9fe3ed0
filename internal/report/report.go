// Package report describes a lock's state and holder as hold shows them:
// the records behind `hold status` (text and --json), `hold ls` and the
// agent's status replies and error holders, so that all of them say the
// same thing in the same words.
package report

import (
	"fmt"
	"github.com/hold-dev/hold"
	"github.com/hold-dev/hold/internal/redact"
	"slices"
	"strings"
	"time"

	"github.com/hold-dev/hold/internal/lockspec"
	"github.com/hold-dev/hold/internal/proc"
)

// Status describes a lock's state for people and programs: what `hold
// status` prints, its --json output, and the agent's status reply.
type Status struct {
	Target   string `json:"target,omitempty"`
	Path     string `json:"lock_file"`
	Protocol string `json:"protocol"`
	// State is "free", "held exclusive", "held shared" or "stale".
	State string `json:"state"`
	Held  bool   `json:"held"`
	// Token is the last fencing token handed out on this lock.
	Token uint64 `json:"token"`
	// Holder is the owner record (for a free lock: the last holder's).
	Holder *Holder `json:"holder,omitempty"`
	// KernelPIDs are the processes the kernel says keep the lock (Linux;
	// see hold.Holder.PIDs).
	KernelPIDs []int `json:"kernel_pids,omitempty"`
	// Openers are the processes that have the lock file open, looked up
	// when the recorded holder is dead but the lock is held (Linux).
	Openers []Opener `json:"openers,omitempty"`
	// Note explains a surprising state.
	Note string `json:"note,omitempty"`
	// Judged says what decided a portable lock's state: the holder's
	// liveness on this host, or, for a holder on another host or without
	// a record, its heartbeat's age.
	Judged string `json:"judged,omitempty"`
	// Slots is, for a semaphore (hold run --slots), its number of slots,
	// and SlotsHeld how many are held; SlotHolders has one entry per
	// slot. Zero and empty for a plain lock.
	Slots       int        `json:"slots,omitempty"`
	SlotsHeld   int        `json:"slots_held,omitempty"`
	SlotHolders []SlotInfo `json:"slot_holders,omitempty"`
}

// SlotInfo is one slot of a semaphore: whether it is held, and by whom
// (its owner record; the kernel's pids where it has none, as for a slot
// taken by hand with flock(1)).
type SlotInfo struct {
	Slot       int     `json:"slot"`
	Held       bool    `json:"held"`
	Holder     *Holder `json:"holder,omitempty"`
	KernelPIDs []int   `json:"kernel_pids,omitempty"`
}

// SemaphoreState says how much of a semaphore is held, for people and
// for `hold ls`: "3/4 held", "free (4 slots)".
func (r *Status) SemaphoreState() string {
	if r.SlotsHeld == 0 {
		return fmt.Sprintf("free (%d slots)", r.Slots)
	}
	return fmt.Sprintf("%d/%d held", r.SlotsHeld, r.Slots)
}

// Holder describes a lock's holder from its owner record.
type Holder struct {
	PID  int    `json:"pid"`
	Host string `json:"host,omitempty"`
	// Alive is whether the holder's process still runs: true or false,
	// or nil (JSON null) where hold cannot tell (a holder on another
	// host or in another pid namespace, no record). Liveness says it in
	// words.
	Alive       *bool             `json:"alive"`
	Command     []string          `json:"command,omitempty"`
	StartedAt   *time.Time        `json:"started_at,omitempty"`
	HeldSeconds float64           `json:"held_seconds,omitempty"`
	Shared      bool              `json:"shared,omitempty"`
	Fields      map[string]string `json:"fields,omitempty"`
}

// CommandLine is the holder's command line on one line: its line breaks
// and tabs written as \n, \r and \t (a multi-line hold run -c 'a
// b' would otherwise break the line of a report, or the column of a
// table).
func (h *Holder) CommandLine() string { return OneLine(strings.Join(h.Command, " ")) }

// OneLine writes the line breaks and tabs of s as \n, \r and \t.
func OneLine(s string) string { return lineBreaks.Replace(s) }

var lineBreaks = strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`)

// aliveOf is Holder.Alive for l: nil when it is unknown.
func aliveOf(l hold.Liveness) *bool {
	if l == hold.LivenessUnknown {
		return nil
	}
	alive := l == hold.Alive
	return &alive
}

// Liveness is Alive in words: "alive", "dead" or "unknown".
func (h *Holder) Liveness() string {
	switch {
	case h.Alive == nil:
		return "unknown"
	case *h.Alive:
		return "alive"
	}
	return "dead"
}

// Opener is a process that has the lock file open.
type Opener struct {
	PID     int    `json:"pid"`
	Command string `json:"command,omitempty"`
}

// NewStatus describes st, the state of target's lock.
func NewStatus(target string, st *hold.Status) *Status {
	r := &Status{
		Target:   redact.URL(target),
		Path:     st.Path,
		Protocol: st.Protocol,
		State:    st.State.String(),
		Held:     st.State == hold.HeldExclusive || st.State == hold.HeldShared,
		Token:    st.Fence,
	}
	if st.Slots > 0 {
		return newSemaphore(r, st)
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
	r.Holder = NewHolder(h, r.Held)
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
			"(it does once it has held the lock for 10-60 ms or is asked for its token), or one that could not write it"
	case len(h.PIDs) > 0 && !slices.Contains(h.PIDs, h.Owner.PID):
		r.Note = fmt.Sprintf("the kernel names pid %s as the holder, not the recorded pid %d", JoinPIDs(h.PIDs), h.Owner.PID)
	}
	return r
}

// newSemaphore completes r for the semaphore st.
func newSemaphore(r *Status, st *hold.Status) *Status {
	r.Slots = st.Slots
	for k, h := range st.SlotHolders {
		s := SlotInfo{Slot: k, Held: h != nil}
		if h != nil {
			r.SlotsHeld++
			s.KernelPIDs = h.PIDs
			if h.Owner != nil && !h.Owner.Released {
				s.Holder = NewHolder(h, true)
			}
		}
		r.SlotHolders = append(r.SlotHolders, s)
	}
	switch h := st.Holder; {
	case r.SlotsHeld > 0:
		// Every slot holder is named in SlotHolders; one of them alone
		// as "the" holder would read as the semaphore's only one.
		r.Note = "a semaphore, " + r.SemaphoreState() + ": slot_holders names each holder"
	case h != nil && h.Owner != nil && !h.Owner.Released:
		// No slot held, and the lock itself held exclusively: that
		// plain holder keeps every slot out.
		r.Holder = NewHolder(h, true)
	}
	return r
}

// NewHolder describes h's owner record (nil without one); held says
// whether the lock is held now, so that the time held means something.
func NewHolder(h *hold.Holder, held bool) *Holder {
	o := h.Owner
	if o == nil {
		return nil
	}
	hr := &Holder{PID: o.PID, Host: o.Host, Alive: aliveOf(h.Alive), Command: o.Command,
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

// NewErrorHolder describes who holds a lock for an error about contention
// that a program reads (the agent's error.holder): the owner record where
// the kernel agrees with it or cannot be asked, and otherwise, when the
// record is absent (flock(1) holds the lock) or names a process that does
// not keep it (a dead holder whose child has the lock), the first process
// the kernel says keeps the lock, which runs, with its command line where
// it can be read.
func NewErrorHolder(h *hold.Holder) *Holder {
	if len(h.PIDs) == 0 || h.Owner != nil && slices.Contains(h.PIDs, h.Owner.PID) {
		return NewHolder(h, true)
	}
	pid := h.PIDs[0]
	hr := &Holder{PID: pid, Host: proc.Hostname(), Alive: aliveOf(hold.Alive)}
	// The arguments as they are now, if the process is still the one
	// whose command line the error read.
	if a := proc.Args(pid); len(a) > 0 && strings.Join(a, " ") == h.Commands[pid] {
		hr.Command = proc.MaskSecrets(a)
	}
	return hr
}

// JoinPIDs lists pids for people: "4242, 4243".
func JoinPIDs(pids []int) string {
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ", ")
}
