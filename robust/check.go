package robust

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Record is one line of the history: an event recorded from inside a
// critical section (enter, exit, term), or by the runner (a client's end, a
// fault of the nemesis). Times are CLOCK_MONOTONIC nanoseconds of the one
// machine.
type Record struct {
	Op     int    `json:"op"`
	Ev     string `json:"ev"` // enter, exit, term, client, fault
	T      int64  `json:"t"`
	Pid    int    `json:"pid"`
	Mode   string `json:"mode,omitempty"`
	N      int    `json:"n,omitempty"`
	Slot   int    `json:"slot"`
	Token  uint64 `json:"token,omitempty"`
	Target string `json:"target,omitempty"`
	Client string `json:"client,omitempty"`
	Proto  string `json:"proto,omitempty"`
	// An update's section: the count and last writer it read.
	Old     int `json:"old,omitempty"`
	OldLast int `json:"oldlast,omitempty"`
	// A client's end (ev client): started at T, ended at End.
	End    int64  `json:"end,omitempty"`
	Exit   int    `json:"exit,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// A fault (ev fault): Note is its kind, Victim the process, File the file.
	Victim int    `json:"victim,omitempty"`
	File   string `json:"file,omitempty"`
	Note   string `json:"note,omitempty"`
}

// Finding is one thing the checker says about a history.
type Finding struct {
	Kind string // overlap, slots, token, lost-update, append, exit, diagnosis, excused
	Text string
	At   int64 // nanoseconds from the run's start to the event that showed it
}

// Verdict is the checker's judgement.
type Verdict struct {
	Failures []Finding
	Excused  []Finding // overlaps and token breaks after a file fault, told in time
	Sections int
	Updates  int // updates in the counter's chain
	Appends  int
}

// OK reports whether the history broke no guarantee.
func (v *Verdict) OK() bool { return len(v.Failures) == 0 }

// Count is how many failures of kind the history has.
func (v *Verdict) Count(kind string) int {
	n := 0
	for _, f := range v.Failures {
		if f.Kind == kind {
			n++
		}
	}
	return n
}

// LossBound is how long after a lock file is removed or replaced its holder
// may go on before it is told: the loss watch looks once a second
// (internal/flock/watch.go), and a loaded machine, hold run's SIGTERM and
// the section's own record take some more.
const LossBound = 3 * time.Second

type section struct {
	Record       // the enter record
	end    int64 // exit, term, kill, or the client's end
	told   int64 // when it was told of a loss (a term record or a lost client's end); 0: never
	cl     *Record
}

func (s *section) String() string {
	tok := "-"
	if s.Token > 0 {
		tok = strconv.FormatUint(s.Token, 10)
	}
	slot := ""
	if s.Mode == modeSlot {
		slot = fmt.Sprintf(" N=%d slot %d", s.N, s.Slot)
	}
	return fmt.Sprintf("op %d pid %d (%s %s %s%s token %s) [%s, %s]", s.Op, s.Pid, s.Client, s.Proto, s.Mode, slot, tok, ms(s.T), ms(s.end))
}

var t0 int64

func ms(t int64) string {
	if t == math.MaxInt64 {
		return "end"
	}
	return fmt.Sprintf("%.3fs", float64(t-t0)/1e9)
}

// History is what Check judges.
type History struct {
	Records []Record
	Ops     []Op
	Start   int64  // the run's start
	Counter []byte // the counter file at the end
	Log     []byte // the append log at the end
	Mixed   bool   // kernel and portable locks on one target
}

// standsOn reports whether section s's hold stands on the lock file file
// (a base name): TARGET.lock for every mode, the count file for slot
// holders, a slot file for its own slot's holder.
func standsOn(s *section, file string) bool {
	base := s.Target + ".lock"
	switch {
	case file == base:
		return true
	case s.Mode != modeSlot || s.N == 1:
		return false // --slots 1 is the plain lock's path: TARGET.lock alone
	case file == base+".slots":
		return true
	case strings.HasPrefix(file, base+".slot"):
		return file == fmt.Sprintf("%s.slot%d", base, s.Slot)
	}
	return false
}

// Check judges a whole history.
func Check(h History) *Verdict {
	t0 = h.Start
	v := &Verdict{}
	fail := func(kind string, at int64, f string, a ...any) {
		v.Failures = append(v.Failures, Finding{kind, fmt.Sprintf(f, a...), at - h.Start})
	}
	excuse := func(f string, a ...any) {
		v.Excused = append(v.Excused, Finding{"excused", fmt.Sprintf(f, a...), 0})
	}

	clients := map[int]*Record{}
	killed := map[int]int64{} // pid -> when the nemesis killed it
	var fileFaults []Record
	var stops []Record
	byOp := map[int][]Record{}
	for i := range h.Records {
		r := &h.Records[i]
		switch r.Ev {
		case "client":
			clients[r.Op] = r
		case "fault":
			switch r.Note {
			case faultKill:
				killed[r.Victim] = r.T
			case faultStop:
				stops = append(stops, *r)
			default:
				fileFaults = append(fileFaults, *r)
			}
		default:
			byOp[r.Op] = append(byOp[r.Op], *r)
		}
	}
	// Sections: one per enter record, ended by the same process's exit or
	// term, else by its death.
	var secs []*section
	for op, recs := range byOp {
		for _, e := range recs {
			if e.Ev != "enter" {
				continue
			}
			s := &section{Record: e, end: math.MaxInt64, cl: clients[op]}
			for _, r := range recs {
				if r.Pid == e.Pid && (r.Ev == "exit" || r.Ev == "term") {
					s.end = r.T
					if r.Ev == "term" {
						s.told = r.T
					}
				}
			}
			if s.end == math.MaxInt64 {
				if k, ok := killed[e.Pid]; ok {
					s.end = k
				} else if s.cl != nil {
					if k, ok := killed[s.cl.Pid]; ok {
						s.end = k
					} else {
						s.end = s.cl.End
					}
				}
			}
			if s.told == 0 && s.cl != nil && s.cl.Exit == 65 {
				s.told = s.cl.End
			}
			secs = append(secs, s)
		}
	}
	v.Sections = len(secs)
	sort.Slice(secs, func(i, j int) bool { return secs[i].T < secs[j].T })

	// faultBetween: a file fault of target in (a, b].
	faultBetween := func(target string, a, b int64) *Record {
		var last *Record
		for i := range fileFaults {
			f := &fileFaults[i]
			if f.Target == target && f.T > a && f.T <= b {
				last = f // the latest
			}
		}
		return last
	}
	// toldInTime: s was live at a file fault of its target and told of the
	// loss within LossBound of it.
	// toldInTime: a file s stands on was removed or replaced while s was
	// in, before the newcomer entered, and s was told of the loss within
	// LossBound, or left before the watch had to look: the window
	// docs/cli.md documents (the newcomer takes the new file at once).
	// A guarded write (hold update, hold append) whose lock was lost
	// exits 65 without writing: its section only reads and computes, so a
	// loss told at its end, before the write it refuses, is in time (the
	// lost-update checks below judge what was written).
	guarded := func(s *section) bool {
		return (s.Client == clientUpdate || s.Client == clientAppend) && s.cl != nil && s.cl.Exit == 65
	}
	toldInTime := func(s *section, before int64) *Record {
		for i := range fileFaults {
			f := &fileFaults[i]
			if f.Target == s.Target && standsOn(s, f.File) && f.T >= s.T && f.T <= s.end && f.T <= before &&
				(guarded(s) || (s.told != 0 && s.told <= f.T+int64(LossBound)) || s.end <= f.T+int64(LossBound)) {
				return f
			}
		}
		return nil
	}
	// A section still in LossBound after a file it stands on was removed
	// or replaced must have been told (65, Lost) by then, unless it or
	// its client was stopped, which delays the telling.
	stoppedIn := func(s *section, a, b int64) bool {
		for _, st := range stops {
			if (st.Victim == s.Pid || (s.cl != nil && st.Victim == s.cl.Pid)) && st.T <= b && st.End >= a {
				return true
			}
		}
		return false
	}
	for _, s := range secs {
		for _, f := range fileFaults {
			bound := f.T + int64(LossBound)
			// flock(1) watches nothing: it cannot be told.
			if s.Client == clientFlock || guarded(s) || f.Target != s.Target || !standsOn(s, f.File) || f.T < s.T || s.end <= bound || stoppedIn(s, s.T, bound) {
				continue
			}
			if s.told == 0 || s.told > bound {
				fail("untold", bound, "%s was still in %v after %s of %s at %s and was not told it lost the lock (told: %s)", s, LossBound, f.Note, f.File, ms(f.T), ms(s.told))
			}
			break
		}
	}

	flockOnOld := func(a, b *section) *Record {
		for _, s := range []*section{a, b} {
			if s.Client != clientFlock || s.cl == nil {
				continue
			}
			for i := range fileFaults {
				f := &fileFaults[i]
				if f.Target == s.Target && f.File == s.Target+".lock" && f.T >= s.cl.T && f.T <= s.end {
					return f
				}
			}
		}
		return nil
	}

	// Exclusion: sweep in entry order with the sections still in.
	var active []*section
	for _, b := range secs {
		keep := active[:0]
		for _, a := range active {
			if a.end > b.T {
				keep = append(keep, a)
			}
		}
		active = keep
		slotsIn := 0
		for _, a := range active {
			if a.Target != b.Target {
				continue
			}
			conflict := ""
			switch {
			case a.Mode == modeExcl || b.Mode == modeExcl:
				conflict = "an exclusive holder beside another holder"
			case a.Mode == modeSlot && b.Mode == modeSlot && a.N != b.N:
				conflict = "slot holders of two different N at once"
			case a.Mode == modeSlot && b.Mode == modeSlot && a.Slot == b.Slot && a.Slot >= 0:
				conflict = fmt.Sprintf("two holders of slot %d", a.Slot)
			}
			if a.Mode == modeSlot && b.Mode == modeSlot && toldInTime(a, b.T) == nil && toldInTime(b, b.T) == nil {
				slotsIn++
			}
			if conflict == "" {
				continue
			}
			if f := toldInTime(a, b.T); f != nil {
				excuse("%s: %s entered beside %s after %s of %s at %s; the holder was told at %s", conflict, b, a, f.Note, f.File, ms(f.T), ms(a.told))
				continue
			}
			if f := toldInTime(b, b.T); f != nil {
				excuse("%s: %s entered beside %s after %s of %s at %s; the holder was told at %s", conflict, b, a, f.Note, f.File, ms(f.T), ms(b.told))
				continue
			}
			// flock(1) has no loss watch: one that opened the lock file
			// before it was removed or replaced locks the old file.
			if f := flockOnOld(a, b); f != nil {
				excuse("%s: %s entered beside %s: flock(1) opened %s before its %s at %s and locks the old file", conflict, b, a, f.File, f.Note, ms(f.T))
				continue
			}
			why := ""
			if f := faultBetween(b.Target, a.T-int64(10*time.Second), b.T); f != nil {
				why = fmt.Sprintf(" (after %s of %s at %s, and the holder was not told within %v)", f.Note, f.File, ms(f.T), LossBound)
			}
			fail("overlap", b.T, "%s: %s entered at %s while %s was in%s", conflict, b, ms(b.T), a, why)
		}
		if b.Mode == modeSlot && slotsIn+1 > b.N {
			fail("slots", b.T, "%d slot holders of an N=%d semaphore at once when %s entered", slotsIn+1, b.N, b)
		}
		active = append(active, b)
	}

	// Tokens: one sequence per target among exclusive and slot sections.
	for _, target := range []string{counterTarget, logTarget} {
		var ts []*section
		for _, s := range secs {
			if s.Target == target && s.Token > 0 && (s.Mode == modeExcl || s.Mode == modeSlot) {
				ts = append(ts, s)
			}
		}
		seen := map[uint64]*section{}
		for _, s := range ts {
			if o := seen[s.Token]; o != nil {
				if f := faultBetween(target, o.T, s.T); f != nil {
					excuse("token %d given twice on %s, across %s of %s at %s: %s and %s", s.Token, target, f.Note, f.File, ms(f.T), o, s)
				} else {
					both := ""
					if o.end > s.T {
						both = ", both holding at once"
					}
					fail("token", s.T, "token %d given twice on %s%s: %s and %s", s.Token, target, both, o, s)
				}
			} else {
				seen[s.Token] = s
			}
		}
		// A before B (A left before B entered), one of them exclusive:
		// token(A) < token(B). Sweep B in entry order over the A that
		// have left, keeping the largest token of all and of the
		// exclusive ones.
		byEnd := append([]*section(nil), ts...)
		sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].end < byEnd[j].end })
		var maxAll, maxExcl *section
		k := 0
		for _, b := range ts {
			for ; k < len(byEnd) && byEnd[k].end < b.T; k++ {
				a := byEnd[k]
				if maxAll == nil || a.Token > maxAll.Token {
					maxAll = a
				}
				if a.Mode == modeExcl && (maxExcl == nil || a.Token > maxExcl.Token) {
					maxExcl = a
				}
			}
			a := maxExcl
			if b.Mode == modeExcl {
				a = maxAll
			}
			if a == nil || a.Token < b.Token || a.Token == b.Token {
				continue // equal tokens are told above
			}
			if f := faultBetween(target, a.T, b.T); f != nil {
				excuse("token ran backwards on %s across %s of %s at %s: %s, then %s", target, f.Note, f.File, ms(f.T), a, b)
				continue
			}
			fail("token", b.T, "token ran backwards on %s: %s, then %s", target, a, b)
		}
	}

	// Exit statuses and diagnoses.
	checkClients(h, clients, secs, killed, fileFaults, stops, fail)
	// Updates and appends.
	checkCounter(h, clients, byOp, killed, v, fail)
	checkLog(h, clients, killed, v, fail)
	return v
}

var (
	heldBy        = regexp.MustCompile(`held by pids? ([0-9][0-9, ]*)`)
	acquiredAfter = regexp.MustCompile(`hold: acquired .* after ([0-9.]+(?:ns|µs|us|ms|s|m))`)
)

func checkClients(h History, clients map[int]*Record, secs []*section, killed map[int]int64, fileFaults, stops []Record, fail func(string, int64, string, ...any)) {
	// Which processes each op's client had: itself and its section's.
	pidsOf := map[int][]*section{}
	for _, s := range secs {
		pidsOf[s.Pid] = append(pidsOf[s.Pid], s)
		if s.cl != nil && s.cl.Pid != s.Pid {
			pidsOf[s.cl.Pid] = append(pidsOf[s.cl.Pid], s)
		}
	}
	hit := func(victims map[int]int64, c *Record, secsOf []*section) bool {
		if _, ok := victims[c.Pid]; ok {
			return true
		}
		for _, s := range secsOf {
			if _, ok := victims[s.Pid]; ok {
				return true
			}
		}
		return false
	}
	stopped := map[int]int64{}
	for _, s := range stops {
		stopped[s.Victim] = s.T
	}
	clientByPid := map[int]*Record{}
	grantOf := map[*Record]int64{}
	for _, c := range clients {
		clientByPid[c.Pid] = c
		if m := acquiredAfter.FindStringSubmatch(c.Stderr); m != nil {
			if d, err := time.ParseDuration(m[1]); err == nil {
				grantOf[c] = c.T + int64(d)
			}
		}
	}
	grantBefore := func(a *Record, t int64) bool {
		g, ok := grantOf[a]
		return !ok || g <= t
	}
	for _, op := range h.Ops {
		c := clients[op.ID]
		if c == nil {
			continue
		}
		var mine []*section
		for _, s := range pidsOf[c.Pid] {
			if s.Op == op.ID {
				mine = append(mine, s)
			}
		}
		if hit(killed, c, mine) {
			continue // whatever a killed client says is not judged
		}
		bad := ""
		switch e := c.Exit; {
		case e == 0:
		case e == 1:
			if !op.Try && op.Wait == 0 {
				bad = "a blocking request failed as busy"
			}
		case e == 64:
			// On the portable protocol a plain lock is a semaphore of
			// one, refused while slots of another N are held
			// (docs/portable.md), and a kernel lock refuses a
			// semaphore's directory.
			if op.Mode != modeSlot && !op.SlotsOpt && !(op.Proto == "dir" || h.Mixed) {
				bad = "a usage error"
			}
		case e == 65:
			fault := false
			for _, f := range fileFaults {
				if f.Target == op.Target && f.T >= c.T && f.T <= c.End {
					fault = true
				}
			}
			if !fault && !hit(stopped, c, mine) {
				bad = "a loss reported with no lock file removed or replaced and no process stopped"
			}
		case e == 66 && h.Mixed && op.Proto == "kernel" && strings.Contains(c.Stderr, "directory lock of the portable protocol"):
			// A kernel lock refuses the portable protocol's directory.
		case e == 70:
			bad = "a deadlock reported where no process waits for two locks"
		default:
			bad = "an unexpected exit status"
		}
		if bad != "" {
			fail("exit", c.End, "%s: %s exited %d: %s", op, bad, c.Exit, firstLine(c.Stderr))
		}
		// A busy message names processes that held the lock then.
		if c.Exit != 1 {
			continue
		}
		m := heldBy.FindStringSubmatch(c.Stderr)
		if m == nil {
			continue
		}
		// A holder's hold starts when hold says "acquired ... after D"
		// (its client's start plus D), else when its section entered;
		// a section starts late on a loaded machine, hence the slack.
		const slack = int64(250 * time.Millisecond)
		for _, f := range strings.Split(m[1], ",") {
			pid, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				continue
			}
			ok := false
			for _, s := range pidsOf[pid] {
				// Without hold's word for when it got the lock (flock(1),
				// the Go client), the section's entry is all there is,
				// and a loaded machine starts a section late.
				from, sl := s.T, int64(time.Second)
				if g, ok := grantOf[s.cl]; ok {
					from, sl = min(g, s.T), slack
				}
				if s.Target == op.Target && from <= c.End+sl && s.end >= c.T-slack {
					ok = true
				}
			}
			// A holder with no section then: hold append (no section of
			// ours), or a client stopped or killed by the nemesis
			// between taking the lock and entering its section. Its
			// client's life is the bound, if it got the lock at all.
			if a := clientByPid[pid]; !ok && a != nil && a.Target == op.Target && grantBefore(a, c.End+slack) && a.End >= c.T {
				o := h.Ops[a.Op]
				_, stoppedNow := stopped[a.Pid]
				_, killedNow := killed[a.Pid]
				if isAppend(o) && (a.Exit == 0 || a.Exit == 65) || stoppedNow || killedNow {
					ok = true
				}
			}
			if !ok {
				fail("diagnosis", c.End, "%s was told the lock was held by pid %d, which held no section of %s between %s and %s: %s", op, pid, op.Target, ms(c.T), ms(c.End), firstLine(c.Stderr))
			}
		}
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " ..."
	}
	return s
}

func isUpdate(op Op) bool {
	return op.Client == clientUpdate || (op.Client == clientGo && op.GoCall == goUpdate)
}

func isAppend(op Op) bool {
	return op.Client == clientAppend || (op.Client == clientGo && op.GoCall == goAppend)
}

// checkCounter follows the counter file's chain of writers back from its
// final content (each write names its op, each op recorded what it read),
// names every update that exited 0 and is not in it (a lost update), and
// has porcupine check the updates as a register of increments: each read
// the value the one before it wrote, in an order their real times allow.
func checkCounter(h History, clients map[int]*Record, byOp map[int][]Record, killed map[int]int64, v *Verdict, fail func(string, int64, string, ...any)) {
	final, err := parseCounter(h.Counter)
	if err != nil {
		fail("lost-update", math.MaxInt64, "the counter file is not JSON: %q", h.Counter)
		return
	}
	read := map[int]Record{}
	for op, recs := range byOp {
		for _, r := range recs {
			if r.Ev == "enter" && r.Target == counterTarget && isUpdate(h.Ops[op]) {
				read[op] = r
			}
		}
	}
	inChain := map[int]bool{}
	chain := []int{}
	for cur := final.Last; cur != -1; {
		r, ok := read[cur]
		if !ok || inChain[cur] {
			fail("lost-update", math.MaxInt64, "the counter's chain of writers breaks at op %d (no record of what it read)", cur)
			break
		}
		inChain[cur] = true
		chain = append(chain, cur)
		cur = r.OldLast
	}
	v.Updates = len(chain)
	if final.Count != len(chain) {
		fail("lost-update", math.MaxInt64, "the counter says %d but %d writes are chained to it", final.Count, len(chain))
	}
	var ops []porcupine.Operation
	for _, op := range h.Ops {
		if !isUpdate(op) {
			continue
		}
		c := clients[op.ID]
		if c == nil {
			continue
		}
		_, wasKilled := killed[c.Pid]
		if r, ok := read[op.ID]; ok {
			if _, k := killed[r.Pid]; k {
				wasKilled = true
			}
		}
		switch {
		case c.Exit == 0 && !inChain[op.ID]:
			r := read[op.ID]
			by := ""
			for _, o := range chain {
				if read[o].Old == r.Old {
					by = fmt.Sprintf(", overwritten by op %d, which read the same count", o)
				}
			}
			fail("lost-update", c.End, "%s exited 0 but its write is not in the counter (it read count %d%s)", op, r.Old, by)
		case inChain[op.ID] && c.Exit != 0 && !wasKilled && c.Exit != 65:
			fail("lost-update", c.End, "%s exited %d but its write is in the counter", op, c.Exit)
		}
		if inChain[op.ID] || c.Exit == 0 {
			ops = append(ops, porcupine.Operation{ClientId: op.ID, Call: c.T, Return: c.End, Output: read[op.ID].Old})
		}
	}
	model := porcupine.Model{
		Init: func() any { return 0 },
		Step: func(state, _, out any) (bool, any) {
			s := state.(int)
			return out.(int) == s, s + 1
		},
	}
	if res := porcupine.CheckOperationsTimeout(model, ops, 30*time.Second); res == porcupine.Illegal {
		fail("lost-update", math.MaxInt64, "the %d updates are not linearizable as increments of one counter (porcupine)", len(ops))
	}
}

// checkLog: each append that exited 0 is in the log once, none twice, and
// porcupine finds an order of them, consistent with their real times, in
// which each lands at its place in the file.
func checkLog(h History, clients map[int]*Record, killed map[int]int64, v *Verdict, fail func(string, int64, string, ...any)) {
	where := map[int][]int{}
	lines := strings.Split(strings.TrimSuffix(string(h.Log), "\n"), "\n")
	if len(h.Log) == 0 {
		lines = nil
	}
	for i, l := range lines {
		op, err := strconv.Atoi(l)
		if err != nil || op < 0 || op >= len(h.Ops) || !isAppend(h.Ops[op]) {
			fail("append", math.MaxInt64, "line %d of the log, %q, is no append's", i+1, l)
			continue
		}
		where[op] = append(where[op], i)
	}
	v.Appends = len(lines)
	var ops []porcupine.Operation
	for _, op := range h.Ops {
		if !isAppend(op) {
			continue
		}
		c := clients[op.ID]
		if c == nil {
			continue
		}
		_, wasKilled := killed[c.Pid]
		w := where[op.ID]
		switch {
		case len(w) > 1:
			fail("append", c.End, "%s is in the log %d times (lines %v)", op, len(w), w)
		case len(w) == 0 && c.Exit == 0:
			fail("append", c.End, "%s exited 0 but its line is not in the log", op)
		case len(w) == 1 && c.Exit != 0 && !wasKilled && c.Exit != 65:
			fail("append", c.End, "%s exited %d but its line is in the log", op, c.Exit)
		}
		if len(w) >= 1 {
			ops = append(ops, porcupine.Operation{ClientId: op.ID, Call: c.T, Return: c.End, Output: w[0]})
		}
	}
	model := porcupine.Model{
		Init: func() any { return 0 },
		Step: func(state, _, out any) (bool, any) {
			s := state.(int)
			return out.(int) == s, s + 1
		},
	}
	if res := porcupine.CheckOperationsTimeout(model, ops, 30*time.Second); res == porcupine.Illegal {
		fail("append", math.MaxInt64, "the %d appends are not linearizable as one log: a line landed before one that had returned before it began (porcupine)", len(ops))
	}
}

// counter is the content of the counter file: how many updates, and the op
// of the last one, so the checker can chain every write to the one it read.
type counter struct {
	Count int `json:"count"`
	Last  int `json:"last"` // op of the last update; -1 for none
}

func parseCounter(b []byte) (counter, error) {
	c := counter{Last: -1}
	if len(b) == 0 {
		return c, nil
	}
	err := json.Unmarshal(b, &c)
	return c, err
}
