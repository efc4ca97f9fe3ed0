package deadlock

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/waits"
	"github.com/hold-dev/hold/lock"
	"github.com/hold-dev/hold/portable"
)

// Deadlocks between processes (see DeadlockAfter). Process A holds L1 and
// waits for L2 while B holds L2 and waits for L1: neither can go on. The
// kernel does not say so for flock(2) locks (only for fcntl's), and
// nothing else can see it, so each wait that lasts DeadlockAfter looks
// for itself:
//
//  1. It publishes a wait entry (internal/waits): who waits, for which
//     lock (by its identity, id.go), since when. One small
//     write, removed when the wait ends; nothing for a shorter wait.
//  2. It follows the chain: the processes that keep the lock it waits for
//     (the kernel's word for a kernel lock, through /proc/locks and the
//     descriptors that keep it; the live local holder its owner record
//     names for a portable lock), the one wait entry those processes
//     stand for (the entry's process itself, or ancestors of it that can
//     do nothing before it ends: hold run, flock(1), a shell in the
//     foreground, each with a single thread unless it is a runner), that
//     entry's lock, and so on. A holder that stands for no entry, or for
//     more than one, ends the chain: it may yet release the lock. So does
//     a waiter's process that keeps the lock without its entry claiming
//     it (below): another of its goroutines, threads or tasks may hold
//     it, and release it while this one waits.
//  3. A chain that comes back to this wait is a cycle; one that comes
//     back to another wait is someone else's (they will see it). The
//     cycle must be found again, the same waits in the same order, at
//     the next look a moment later, the second time with every
//     descriptor of each kernel lock accounted for.
//  4. Exactly one wait of the cycle gives up: the youngest (the latest
//     Since, then the greatest entry name), which every waiter of the
//     cycle computes alike. Its Acquire fails with lock.ErrDeadlock, naming
//     every process and lock; the others go on waiting, and get their
//     locks once its program lets go of what it holds.
//
// The rule: a cycle is reported only when every wait in it is unbounded
// and every process it passes through provably cannot act before its
// wait ends. So a chain ends, and nothing is reported, at
//
//   - a wait with a deadline (its context's: hold run -w, a Go context
//     with a deadline, a Node or Python client's timeout through the
//     agent): it ends by itself, and the others go on then. Every wait
//     entry says its deadline (waits.Entry.Deadline, and the servers'
//     lock.ServerWait.Deadline), and a bounded wait does not search;
//   - a process that can act on its own: only hold run, hold update and
//     flock(1) waiting for their command, and a shell without a trap
//     waiting for its only child, are vouched for (cannotActAlone); not
//     timeout(1), which kills its child when its timer fires, nor a shell
//     with a trap, nor any other program;
//   - a holder that stands for no wait, or for more than one (above).
//
// A wait that can only end by failing (its own lock, kept by its process
// or by ancestors that wait for it) is not such a cycle: it is reported at
// once, whatever its deadline, by FailIfHeldHere, the ancestor check
// (ancestor.go) and, for a descriptor this process was started
// with, inheritedDeadlock. A cycle has at least two waits.
//
// What a wait keeps. A process that holds L1 while one of its goroutines
// waits for L2 does not, for that, keep L1 until the wait ends: another
// goroutine may hold L1 and release it in a moment. Calling that a
// deadlock would be false, so an entry claims only the locks its wait
// provably keeps (Entry.Keeps), and the chain passes through a waiter's
// own process only by a lock its entry claims:
//
//   - the locks of the Do calls whose fn the wait runs in: Do passes fn
//     a context that names its lock (Kept), and fn returns, releasing
//     it, only after what it waits for; a goroutine fn starts and does
//     not wait for should not be given that context;
//   - the locks given to FailIfHeldBy (the caller keeps them while it
//     waits: a Python thread's own locks, through the agent's held_by);
//   - the kernel locks a caller of this process's holds in its own
//     process and keeps while it waits (proc.WithCallerKeeps: a Python
//     thread's in-process locks, through the agent's held_inproc), which
//     the entry claims for the caller (Entry.CallerKeeps);
//   - every lock and descriptor of the process with FailIfHeldHere
//     (nothing in it can release a lock while this call waits: the
//     hold command, a Node client blocked in lockSync), Entry.KeepsAll.
//
// Nothing is looked at for it before a wait has lasted DeadlockAfter:
// the context is read then, and taking a lock costs nothing more.

// defaultDeadlockAfter is DeadlockAfter's default.
const defaultDeadlockAfter = time.Second

// cycleSearch says whether waits look for cycles here: the holders of
// kernel locks and the waits of ancestors can be told on Linux only.
const cycleSearch = runtime.GOOS == "linux"

// cycleWatch is a request's lock.WaitWatcher: when the wait begins it
// arms a timer, and once that fires, the search above runs until the
// wait ends.
type cycleWatch struct {
	delay  time.Duration
	caller int
	proto  string
	path   string
	shared bool
	// graph is the protocol's, for a lock that lives on a server
	// (remote.go); nil for this machine's locks.
	graph lock.WaitGraph
	// keepAll and heldBy: what the wait keeps besides the locks its
	// context names (FailIfHeldHere, FailIfHeldBy; see the top of this
	// file).
	keepAll bool
	heldBy  []*Held
	// callerKeeps: the kernel locks the caller holds in its own process
	// and keeps while the wait lasts (proc.WithCallerKeeps).
	callerKeeps []proc.HeldFile
	// off: the search is off (DeadlockAfter(0)); the watch only asks
	// inheritedDeadlock.
	off bool
	// st is the current wait's, nil between waits.
	st *cycleWait
}

// cycleWait is one watched wait.
type cycleWait struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	since  time.Time
	// deadline is when the wait gives up by itself (its context's), zero
	// for none: a bounded wait is never a link of a reported cycle.
	deadline time.Time
	timer    *time.Timer // the search's, nil for none
	// inherited is closed when watchInherited ended, nil for none.
	inherited chan struct{}
	// publish says the wait on its server (lock.ServerWatcher), nil
	// for a wait on this machine.
	publish func(ctx context.Context, keeps []lock.Handle) (string, func(), error)
	// repub is the publish of the wait as it started again (a waiter
	// that queued again on its server), until the search takes it.
	repub  atomic.Pointer[func(context.Context, []lock.Handle) (string, func(), error)]
	done   chan struct{} // closed when the wait ended
	exited chan struct{} // closed when the search ended
}

// Watch prepares the deadlock watch of w's request, which acquire
// gives the request for its wait (lock.Request.Watch) and takes back
// after, so that no other use of the request can start a watch; unless the search is
// off (DeadlockAfter(0)) or the protocol's locks are not ones it can
// follow: kernel and portable locks of this machine, on Linux, and the
// locks of a server whose protocol implements lock.WaitGraph
// (remote.go).
func (c *Config) Watch(w *Watched) {
	graph, _ := c.Protocol.(lock.WaitGraph)
	name := c.Protocol.Name()
	if c.After < 0 {
		// No search; but a process that nothing in it can make let go
		// (FailIfHeldHere) still learns at once that it waits for a
		// kernel lock it keeps itself (inheritedDeadlock).
		if c.HeldHere && name == "flock" && graph == nil && cycleSearch {
			w.watch = cycleWatch{proto: name, path: w.Request.Path, shared: w.Request.Shared, keepAll: true, caller: c.Caller, off: true}
			c.watch = &w.watch
		}
		return
	}
	if graph == nil {
		if _, network := c.Protocol.(lock.Closer); network || !cycleSearch {
			return
		}
		if name != "flock" && name != "dir" {
			return
		}
	}
	d := c.After
	if d == 0 {
		d = defaultDeadlockAfter
	}
	w.watch = cycleWatch{delay: d, caller: c.Caller, proto: name, path: w.Request.Path, shared: w.Request.Shared, graph: graph,
		keepAll: c.HeldHere, heldBy: c.HeldBy, callerKeeps: c.CallerKeeps}
	c.watch = &w.watch
}

// Waiting starts the watch of a wait that begins (lock.WaitWatcher).
func (w *cycleWatch) Waiting(ctx context.Context) context.Context {
	if w.graph != nil {
		// A server's wait is followed only by what the server says:
		// without its entry there nothing can be told.
		return ctx
	}
	return w.waiting(ctx, nil)
}

// waiting starts the watch of a wait that begins, said on its server by
// publish when not nil.
func (w *cycleWatch) waiting(ctx context.Context, publish func(context.Context, []lock.Handle) (string, func(), error)) context.Context {
	if w.st != nil {
		if publish != nil {
			w.st.repub.Store(&publish)
		}
		return w.st.ctx
	}
	// A process that nothing in it can make let go, and that keeps the
	// kernel lock it waits for through a descriptor of its own, may wait
	// for ever (inheritedDeadlock): that is watched while it waits.
	inherited := w.keepAll && w.proto == "flock" && w.graph == nil && keepsItself(w.path, w.shared)
	search := !w.off && w.mayCloseCycle(ctx)
	if !inherited && !search {
		// Nothing to watch: the wait keeps its own context, and with it
		// the protocol's cheapest way of waiting.
		return ctx
	}
	st := &cycleWait{since: time.Now(), publish: publish, done: make(chan struct{}), exited: make(chan struct{})}
	st.deadline, _ = ctx.Deadline()
	st.ctx, st.cancel = context.WithCancelCause(ctx)
	if inherited {
		st.inherited = make(chan struct{})
		go st.watchInherited(w.path, w.shared, w.caller)
	}
	if search {
		s := *w
		s.st = nil
		st.timer = time.AfterFunc(w.delay, func() { st.search(&s) })
	}
	w.st = st
	return st.ctx
}

// keepsItself reports whether this process keeps the kernel lock at path
// through a descriptor of its own, in a mode that excludes a request that
// is shared or not.
func keepsItself(path string, shared bool) bool {
	k, ok := proc.FileKeyOf(path)
	return ok && len(proc.OwnKeeps(k, shared)) > 0
}

// watchInherited asks inheritedDeadlock at once and then again while the
// wait lasts, with pauses growing from 10 ms to a second (the shell that
// started this process may not be asleep in its wait yet), and ends the
// wait with its error.
func (st *cycleWait) watchInherited(path string, shared bool, caller int) {
	defer close(st.inherited)
	pause := 10 * time.Millisecond
	for {
		if err := inheritedDeadlock(path, shared, caller); err != nil {
			st.cancel(err)
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-st.done:
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// mayCloseCycle reports whether the wait w, with the context ctx, could
// be part of a cycle of waits: only if something that cannot go on before
// the wait ends keeps a lock, that is the wait itself (a lock it keeps,
// see the top of this file) or an ancestor that runs it under a lock
// (hold run, flock(1)), or a writer's wait on a server, which readers
// queued behind it wait for. A wait that keeps nothing, as most do,
// waits as it always did: it may wait behind a cycle, but the cycle's
// own waits find it.
func (w *cycleWatch) mayCloseCycle(ctx context.Context) bool {
	if w.graph != nil && !w.shared {
		// A writer's wait on a server: readers queued behind it wait
		// for it, so it can close a cycle keeping nothing.
		return true
	}
	return len(w.heldBy) > 0 || len(w.callerKeeps) > 0 || ctx.Value(keptKey{}) != nil || len(runners()) > 0 ||
		w.keepAll && holdsAny()
}

// keptLocks returns the locks, still held, that the wait with the
// context ctx keeps (see the top of this file): every lock of this
// process with keepAll, else those of ctx's Do calls and heldBy.
func (w *cycleWatch) keptLocks(ctx context.Context) []*Held {
	var out []*Held
	if w.keepAll {
		heldHere.Lock()
		out = append(out, heldLocks()...)
		heldHere.Unlock()
	} else {
		out = append(out, w.heldBy...)
		for v := ctx.Value(keptKey{}); v != nil; {
			k := v.(*Kept)
			out = append(out, k.Held)
			v = k.Context.Value(keptKey{})
		}
	}
	out = slices.DeleteFunc(out, func(l *Held) bool { return l == nil || l.released.Load() })
	slices.SortFunc(out, func(a, b *Held) int { return strings.Compare(a.path, b.path) })
	return slices.Compact(out)
}

// keptIDs are the identities of locks, as an entry claims them
// (Entry.Keeps): protocol and lockID, and a target named "*.lock" also
// as the kernel lock of that file (Held.own).
func keptIDs(locks []*Held) []string {
	var out []string
	for _, l := range locks {
		if l.network {
			continue // not followed (see cycleSearch)
		}
		out = append(out, keyOf(fileLockID(l.proto, l.path)))
		if l.own != "" {
			out = append(out, keyOf(fileLockID("flock", l.own)))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// keyOf is a lock's identity as Entry.Keeps lists it.
func keyOf(id lockID) string { return id.proto + " " + id.id }

// endWatch takes the watch back from req and ends its wait's, if one
// began, once the protocol's Acquire returned err: it returns the
// lock.ErrDeadlock error when the watch ended the wait, and err otherwise.
func endWatch(req *lock.Request, err error) error {
	w, ok := req.Watch.(*cycleWatch)
	req.Watch = nil
	if !ok || w.st == nil {
		return err
	}
	st := w.st
	w.st = nil
	close(st.done)
	if st.timer != nil && !st.timer.Stop() {
		<-st.exited
	}
	if st.inherited != nil {
		<-st.inherited
	}
	cause := context.Cause(st.ctx)
	st.cancel(nil)
	if err != nil && errors.Is(cause, lock.ErrDeadlock) {
		return cause
	}
	return err
}

// search publishes the wait's entry and looks for a cycle through it
// until the wait ends or a cycle ends it.
func (st *cycleWait) search(w *cycleWatch) {
	defer close(st.exited)
	select {
	case <-st.done:
		return
	default:
	}
	find, cleanup, ok := st.begin(w)
	if !ok {
		return // nowhere to say it: no cycle can be told
	}
	defer cleanup()
	pause := min(max(w.delay/10, 10*time.Millisecond), 100*time.Millisecond)
	var last []cycleStep
	for {
		// The cycle starts with this wait's entry, as it is now (a
		// server's wait may have said itself again).
		cyc := find()
		if cyc != nil && sameCycle(cyc, last) && youngest(cyc) == cyc[0].e.Name {
			st.cancel(cycleError(cyc[0].e, cyc))
			return
		}
		last = cyc
		t := time.NewTimer(pause)
		select {
		case <-st.done:
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// begin publishes the wait's entry, on its server (beginServer) or in
// this machine's wait entries, and returns the look for a cycle through
// it (the cycle starts with the entry) and the removal of the entry;
// false when it could not be published.
func (st *cycleWait) begin(w *cycleWatch) (find func() []cycleStep, cleanup func(), ok bool) {
	if st.publish != nil {
		return st.beginServer(w)
	}
	me := waits.Self()
	me.Proto = w.proto
	me.Path = canonicalPath(w.path)
	me.Lock = idOf(w.proto, false, w.path).id
	me.Shared = w.shared
	me.Since = st.since.UnixNano()
	if !st.deadline.IsZero() {
		me.Deadline = st.deadline.UnixNano()
	}
	if w.caller > 0 && w.caller != me.PID {
		me.Caller, me.CallerCommand = w.caller, proc.Cmdline(w.caller)
	}
	kept := w.keptLocks(st.ctx)
	for _, l := range kept {
		me.Holds = append(me.Holds, canonicalPath(l.path))
	}
	me.Keeps, me.KeepsAll = keptIDs(kept), w.keepAll
	if me.Caller > 0 {
		for i, id := range callerKeptIDs(w.callerKeeps) {
			me.Holds = append(me.Holds, canonicalPath(w.callerKeeps[i].Path))
			me.CallerKeeps = append(me.CallerKeeps, keyOf(lockID{"flock", id}))
		}
	}
	name, err := waits.Publish(&me)
	if err != nil {
		return nil, nil, false
	}
	me.Name = name
	find = func() []cycleStep {
		if findCycle(me, false) != nil {
			return findCycle(me, true)
		}
		return nil
	}
	return find, func() { waits.Remove(name) }, true
}

// cycleStep is one wait of a cycle: the entry, and the processes that
// keep the lock the previous wait waits for (which stand for this one).
type cycleStep struct {
	e       waits.Entry
	keepers []int
	// queued: this wait stands for the previous one's by its place in
	// the server's queue (a writer that a reader queued behind waits
	// for), not by a hold (remote.go).
	queued bool
}

// findCycle follows the chain of waits from me (see the top of this
// file) and returns the cycle through me, me first, or nil. deep looks
// through every process's descriptors for the keepers of a kernel lock,
// where the cheap look takes the kernel's lock table's word.
func findCycle(me waits.Entry, deep bool) []cycleStep {
	if me.Deadline != 0 {
		return nil // a wait that ends by itself is no link of a deadlock
	}
	entries := waits.List()
	if len(entries) < 2 {
		return nil
	}
	// Which processes stand for each entry: its own and its waiting
	// ancestors, found when first needed.
	groups := make([][]int, len(entries))
	group := func(i int) []int {
		if groups[i] == nil {
			groups[i] = append([]int{entries[i].PID}, vouchedAncestors(entries[i].PID)...)
		}
		return groups[i]
	}
	cyc := []cycleStep{{e: me}}
	cur := me
	for range len(entries) + 1 {
		keepers := lockKeepers(cur.Proto, cur.Path, deep)
		if len(keepers) == 0 {
			return nil
		}
		// The common case, a holder that does not wait, is told by the
		// keepers alone: none is a waiter, and none waits for a child.
		direct := slices.ContainsFunc(entries, func(e waits.Entry) bool {
			return slices.Contains(keepers, e.PID) || callerClaims(keepers, cur, e)
		})
		if !direct {
			for _, k := range keepers {
				if _, ok := proc.SoleChildWaiter(k); !ok {
					return nil
				}
			}
		}
		next := -1
		for i := range entries {
			if direct && !slices.Contains(keepers, entries[i].PID) && !callerClaims(keepers, cur, entries[i]) {
				continue
			}
			if standsFor(keepers, cur, entries[i], func() []int { return group(i) }) {
				if next >= 0 {
					return nil // more than one wait: it may end
				}
				next = i
			}
		}
		if next < 0 {
			return nil
		}
		e := entries[next]
		if e.Deadline != 0 {
			return nil // it ends by itself, and the chain with it
		}
		if e.Name == me.Name {
			if len(cyc) < 2 {
				return nil // its own lock: not a cycle between processes
			}
			cyc[0].keepers = keepers
			return cyc
		}
		if slices.ContainsFunc(cyc, func(s cycleStep) bool { return s.e.Name == e.Name || s.e.PID == e.PID }) {
			return nil // a cycle that is not through this wait
		}
		cyc = append(cyc, cycleStep{e: e, keepers: keepers})
		cur = e
	}
	return nil
}

// vouchedAncestors returns the waiting ancestors of process pid
// (proc.WaitingAncestors) up to the first that hold cannot vouch for
// (cannotActAlone): only those keep a lock until pid's wait ends.
func vouchedAncestors(pid int) []int {
	as := proc.WaitingAncestors(pid)
	for i, a := range as {
		if !cannotActAlone(a) {
			return as[:i]
		}
	}
	return as
}

// cannotActAlone reports whether process pid, asleep in a wait for its
// only child, provably does nothing before that child ends. hold run,
// hold update and flock(1) (waitsForCommand) have no timer once their
// command runs: their -w bounds only the wait for the lock. A shell does
// nothing but wait, unless it has a trap: then a signal (from a process
// that is not its child, or a timer of another's) runs the trap, which
// may unlock or kill. Its trap shows as a signal it catches, beyond the
// ones every shell catches for itself (shellOwnSignals). Anything else
// (timeout(1), which kills its child when its timer fires; a Python or
// Node program waiting in subprocess.run; a supervisor) may act on its
// own as far as hold can tell, and ends the chain.
func cannotActAlone(pid int) bool {
	args := proc.Args(pid)
	if waitsForCommand(args) {
		return true
	}
	if !isShell(args) {
		return false
	}
	caught, ok := proc.CaughtSignals(pid)
	return ok && caught&^shellOwnSignals == 0
}

// shellOwnSignals are the signals a shell without traps catches (bit N-1
// for signal N): SIGCHLD (all), SIGINT (dash, when started where SIGINT
// is not ignored), SIGHUP and SIGWINCH (zsh). Each comes only from
// outside (a terminal, kill). An interactive bash catches many more, to
// clean up before it dies, which cannot be told from a trap: it is not
// vouched for.
const shellOwnSignals = 1<<(1-1) | 1<<(2-1) | 1<<(17-1) | 1<<(28-1)

// isShell reports whether args are a POSIX shell's (a login shell's
// name begins with "-").
func isShell(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch strings.TrimPrefix(filepath.Base(args[0]), "-") {
	case "sh", "dash", "bash", "zsh", "ksh", "ksh93", "mksh", "ash", "yash", "posh":
		return true
	}
	return false
}

// standsFor reports whether every keeper of the lock that the wait prev
// waits for is one of the processes of e's group (e's own, then its
// waiting ancestors), none of which can release it before e's wait ends:
// e's process itself when e claims the lock (e.Keeps, see the top of this
// file), and an ancestor that runs a command under a lock (hold run,
// flock(1)) or has a single thread.
func standsFor(keepers []int, prev, e waits.Entry, group func() []int) bool {
	for _, k := range keepers {
		if k == e.PID {
			if !e.KeepsAll && !slices.Contains(e.Keeps, prev.Proto+" "+prev.Lock) {
				return false // another of its threads may release it
			}
			continue
		}
		if k == e.Caller && slices.Contains(e.CallerKeeps, prev.Proto+" "+prev.Lock) {
			continue // the caller's thread that waits holds it itself
		}
		if !slices.Contains(group(), k) || !waitsForCommand(proc.Args(k)) && proc.Threads(k) != 1 {
			return false
		}
	}
	return true
}

// callerClaims reports whether the entry e claims the lock that the wait
// prev waits for as its caller's (e.CallerKeeps), the caller being one of
// the lock's keepers: the agent's client that holds the lock in its own
// process and waits, through the agent, in e.
func callerClaims(keepers []int, prev, e waits.Entry) bool {
	return e.Caller > 0 && slices.Contains(keepers, e.Caller) && slices.Contains(e.CallerKeeps, prev.Proto+" "+prev.Lock)
}

// lockKeepers returns the processes that keep the lock of protocol proto
// at path, nil when none or when it cannot be told for certain.
func lockKeepers(proto, path string, deep bool) []int {
	switch proto {
	case "flock":
		k, ok := proc.FileKeyOf(path)
		if !ok {
			return nil
		}
		if !deep {
			return proc.KernelHolders(k)
		}
		keepers, unknown := proc.FlockKeepers(k)
		if len(unknown) > 0 {
			return nil
		}
		return keepers
	case "dir":
		st, err := portable.New().Inspect(path)
		if err != nil || st.State != lock.HeldExclusive || st.Holder == nil || st.Holder.Owner == nil {
			return nil
		}
		o := st.Holder.Owner
		if o.PID <= 0 || !proc.Local(o) || proc.Judge(o) != lock.Alive {
			return nil
		}
		return []int{o.PID}
	}
	return nil
}

// sameCycle reports whether a and b are the same waits in the same order.
func sameCycle(a, b []cycleStep) bool {
	return len(a) > 0 && slices.EqualFunc(a, b, func(x, y cycleStep) bool { return x.e.Name == y.e.Name })
}

// youngest returns the name of the entry of cyc whose wait began last
// (the greatest name among equals): the one that gives up.
func youngest(cyc []cycleStep) string {
	y := cyc[0].e
	for _, s := range cyc[1:] {
		if s.e.Since > y.Since || s.e.Since == y.Since && s.e.Name > y.Name {
			y = s.e
		}
	}
	return y.Name
}

// cycleError is the lock.ErrDeadlock error of me, the youngest wait of cyc:
// "pid 123 (make deploy) holds a.lock and waits for b.lock, held by pid
// 456 (./sync.sh), which waits for a.lock".
func cycleError(me waits.Entry, cyc []cycleStep) error {
	var b strings.Builder
	held := cyc[len(cyc)-1].e.Path
	if cyc[0].queued {
		fmt.Fprintf(&b, "%s is queued for %s ahead of a shared request for it", describeWaiter(me), held)
	} else {
		fmt.Fprintf(&b, "%s holds %s", describeWaiter(me), held)
	}
	for _, k := range cyc[0].keepers {
		if k != me.PID {
			fmt.Fprintf(&b, " through its ancestor pid %d (%s)", k, shorten(oneLine(proc.Cmdline(k)), 60))
			break
		}
	}
	fmt.Fprintf(&b, " and waits for %s", me.Path)
	for _, s := range cyc[1:] {
		if s.queued {
			fmt.Fprintf(&b, ", queued behind the exclusive wait of %s, which waits for %s", describeWaiter(s.e), s.e.Path)
			continue
		}
		fmt.Fprintf(&b, ", held by %s, which waits for %s", describeKeeper(s), s.e.Path)
	}
	b.WriteString(": no wait of the cycle can ever end, and this one, the latest to begin, gives up so that the others get their locks; take the locks in one order everywhere")
	return &lock.Error{Op: "acquire", Path: me.Path, Err: lock.ErrDeadlock, Hint: b.String()}
}

// describeWaiter names the process of a wait entry for messages: "pid 123
// (make deploy)", or the program the agent waits for and the agent.
func describeWaiter(e waits.Entry) string {
	if e.Caller > 0 {
		return fmt.Sprintf("pid %d (%s) through pid %d (%s)", e.Caller, shorten(oneLine(e.CallerCommand), 60), e.PID, shorten(oneLine(programOf(e.Command)), 30))
	}
	return fmt.Sprintf("pid %d (%s)", e.PID, shorten(oneLine(e.Command), 60))
}

// describeKeeper names who keeps the lock that stands for step s's wait:
// its waiter, or an ancestor of it that waits for it to end.
func describeKeeper(s cycleStep) string {
	for _, k := range s.keepers {
		if k != s.e.PID {
			return fmt.Sprintf("pid %d (%s), which waits for %s to end", k, shorten(oneLine(proc.Cmdline(k)), 60), describeWaiter(s.e))
		}
	}
	return describeWaiter(s.e)
}

// programOf is a command line with its program's directory left out:
// "hold agent --for app.js".
func programOf(cmdline string) string {
	prog, rest, _ := strings.Cut(cmdline, " ")
	return strings.TrimSpace(filepath.Base(prog) + " " + rest)
}

// oneLine is s with each run of white space (a script's newlines) made
// one space, for a message on one line.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
