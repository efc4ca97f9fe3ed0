// Package robust is hold's robustness suite: random traffic from many real
// client processes against a few targets, a nemesis that kills, stops and
// removes files under them, a history recorded from inside every critical
// section, and a checker that judges the whole history rather than a single
// assertion. A seed decides the schedule of operations and faults, so a
// failure is rerun with the seed it printed.
//
// docs/robustness.md says how to run it, how to add a protocol or a mode,
// and keeps the track record of the defects it finds.
package robust

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Protocols are the protocol names Run accepts, in the order CI runs them.
var Protocols = []string{"kernel", "fair", "dir", "mixed"}

// Config is one run of the suite.
type Config struct {
	Seed     uint64
	Duration time.Duration // how long the schedule of operations lasts
	Protocol string        // one of Protocols
	Hold     string        // the hold binary to test
	Dir      string        // where the targets, the history and the account go
	Clients  int           // at most this many client processes at once (0: 12)
	Log      func(format string, args ...any)
}

// Client kinds: who takes the lock.
const (
	clientRun    = "run"    // hold run T -- SELF (section)
	clientUpdate = "update" // hold update c.json -- SELF (filter)
	clientAppend = "append" // hold append log.txt LINE
	clientGo     = "go"     // SELF in go-client mode, linking hold
	clientFlock  = "flock"  // flock(1) T.lock SELF (section)
)

// Modes of a section.
const (
	modeExcl   = "excl"
	modeShared = "shared"
	modeSlot   = "slot"
)

// Go client calls.
const (
	goAcquire = "acquire"
	goTry     = "try"
	goDo      = "do"
	goUpdate  = "update"
	goAppend  = "append"
)

// Targets: the counter file every update rewrites, and the log every append
// extends. Sections of every kind lock them too, so updates and appends
// contend with plain, shared and slot holders of the same lock.
const (
	counterTarget = "c.json"
	logTarget     = "log.txt"
)

// Op is one scheduled client.
type Op struct {
	ID       int
	At       time.Duration // start, from the beginning of the run
	Client   string
	GoCall   string // for clientGo
	Proto    string // kernel, fair or dir (mixed draws one per op)
	Target   string
	Mode     string
	N        int           // slots, for modeSlot
	Try      bool          // -n
	Wait     time.Duration // -w, when > 0
	HoldFor  time.Duration // how long the section lasts
	Verbose  bool
	SlotsOpt bool // update/append drawn with --slots N (refused on a sound build)
}

// Fault kinds of the nemesis.
const (
	faultKill    = "kill"    // SIGKILL a live client or its section
	faultStop    = "stop"    // SIGSTOP, then SIGCONT after StopFor
	faultRemove  = "remove"  // remove one of a target's lock files
	faultReplace = "replace" // rename a new file over one of them
)

// Fault is one scheduled act of the nemesis. Pick chooses the victim among
// what is live at that moment (processes sorted by op, files by name), which
// is as far as a seed can decide it on a real machine.
type Fault struct {
	At      time.Duration
	Kind    string
	Pick    uint64
	Child   bool // the client's child (a section, a filter) rather than the client
	StopFor time.Duration
	Target  string
}

// Schedule is everything a seed decides.
type Schedule struct {
	Ops    []Op
	Faults []Fault
}

// NewSchedule draws the schedule of cfg's seed. The same seed, duration and
// protocol give the same schedule.
func NewSchedule(cfg Config) Schedule {
	r := rand.New(rand.NewPCG(cfg.Seed, 0x686f6c64726f62)) // "holdrob"
	var s Schedule
	// The semaphore's N changes over time; a request with another N while a
	// slot is held is refused (64), which the checker accepts.
	n := 1 + r.IntN(4)
	nextN := time.Duration(0)
	at := time.Duration(0)
	for id := 0; at < cfg.Duration; id++ {
		if r.IntN(40) == 0 {
			// A burst: many processes starting at once.
			for k := 0; k < 6+r.IntN(6) && at < cfg.Duration; k++ {
				s.Ops = append(s.Ops, drawOp(r, cfg.Protocol, id, at, n))
				id++
			}
		}
		at += time.Duration(r.ExpFloat64() * float64(25*time.Millisecond))
		if at >= nextN {
			n = 1 + r.IntN(4)
			nextN = at + time.Duration(1+r.IntN(4))*time.Second
		}
		s.Ops = append(s.Ops, drawOp(r, cfg.Protocol, id, at, n))
	}
	for i := range s.Ops {
		s.Ops[i].ID = i
	}
	for at := time.Duration(r.IntN(800)) * time.Millisecond; at < cfg.Duration; at += time.Duration(300+r.IntN(1200)) * time.Millisecond {
		f := Fault{At: at, Pick: r.Uint64(), Target: []string{counterTarget, logTarget}[r.IntN(2)]}
		switch x := r.IntN(10); {
		case x < 4:
			f.Kind = faultStop
			f.StopFor = time.Duration(200+r.IntN(5800)) * time.Millisecond
			f.Child = r.IntN(3) == 0
		case x < 7:
			f.Kind = faultKill
			f.Child = r.IntN(2) == 0
		case x < 9:
			f.Kind = faultRemove
		default:
			f.Kind = faultReplace
		}
		s.Faults = append(s.Faults, f)
	}
	return s
}

func drawOp(r *rand.Rand, protocol string, id int, at time.Duration, n int) Op {
	op := Op{ID: id, At: at, Proto: protocol, Verbose: true}
	if protocol == "mixed" {
		op.Proto = []string{"kernel", "dir"}[r.IntN(2)]
	}
	op.Target = []string{counterTarget, logTarget}[r.IntN(2)]
	switch x := r.IntN(20); {
	case x < 8:
		op.Client = clientRun
	case x < 11:
		op.Client = clientUpdate
		op.Target = counterTarget
	case x < 13:
		op.Client = clientAppend
		op.Target = logTarget
	case x < 18:
		op.Client = clientGo
		op.GoCall = []string{goAcquire, goAcquire, goTry, goDo, goUpdate, goAppend}[r.IntN(6)]
		switch op.GoCall {
		case goUpdate:
			op.Target = counterTarget
		case goAppend:
			op.Target = logTarget
		}
	default:
		op.Client = clientFlock
		if protocol == "dir" || protocol == "mixed" {
			// flock(1) speaks only the kernel protocol, and locks the
			// portable protocol's directory without excluding its holder.
			op.Client = clientRun
		}
	}
	op.Mode = modeExcl
	if op.Client == clientRun || op.Client == clientFlock || (op.Client == clientGo && (op.GoCall == goAcquire || op.GoCall == goTry)) {
		switch x := r.IntN(10); {
		case x < 4 && op.Client != clientFlock:
			op.Mode = modeSlot
			op.N = n
			if r.IntN(10) == 0 {
				op.N = 1 + r.IntN(4) // another N now and then: 64 while slots are held
			}
		case x < 6 && op.Proto != "dir":
			op.Mode = modeShared
		}
	}
	if (op.Client == clientUpdate || op.Client == clientAppend) && r.IntN(3) == 0 {
		// Accepted by builds that lost updates under it; refused (64) since.
		op.SlotsOpt = true
		op.N = 2 + r.IntN(3)
	}
	switch x := r.IntN(10); {
	case x < 2:
		op.Try = true
	case x < 4:
		op.Wait = time.Duration(50+r.IntN(2500)) * time.Millisecond
	}
	if op.Client == clientGo && op.GoCall == goTry {
		op.Try, op.Wait = true, 0
	}
	op.HoldFor = time.Duration(r.IntN(30)) * time.Millisecond
	switch r.IntN(16) {
	case 0, 1:
		op.HoldFor = time.Duration(100+r.IntN(400)) * time.Millisecond
	case 2, 3:
		// Long enough that a loss must be told before it ends.
		op.HoldFor = time.Duration(1500+r.IntN(2500)) * time.Millisecond
	}
	return op
}

// String is the op as the account names it.
func (op Op) String() string {
	s := fmt.Sprintf("op %d (%s", op.ID, op.Client)
	if op.GoCall != "" {
		s += " " + op.GoCall
	}
	s += " " + op.Proto + " " + op.Target + " " + op.Mode
	if op.Mode == modeSlot || op.SlotsOpt {
		s += fmt.Sprintf(" --slots %d", op.N)
	}
	if op.Try {
		s += " -n"
	}
	if op.Wait > 0 {
		s += fmt.Sprintf(" -w %.3f", op.Wait.Seconds())
	}
	return s + ")"
}
