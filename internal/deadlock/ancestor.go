package deadlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hold-dev/hold/internal/flock"
	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// Deadlocks with an ancestor. A process started by `hold run T -- …`
// (or `hold update`, or flock(1)) runs while its ancestor holds T's lock
// and waits for it to end: if it waits for that same lock, neither ever
// ends. Acquire says so at once, without being asked, but only when it is
// certain, by what the kernel says now (Linux):
//
//  1. Some ancestor is a runner (hold run, hold update, flock(1): a
//     process that holds a lock while its command runs and waits for it).
//  2. Each ancestor from this process's parent up to that runner is
//     blocked in a wait for its only child (wait4/waitid, a child that
//     ended but is not yet reaped counting as one), which is the next
//     one down: none of them can do anything before this process ends.
//     A shell that started this process in the background and goes on,
//     or that has another child, is not.
//  3. The lock is kept only by processes of that blocked chain, or by
//     this process itself. For a kernel lock "kept by" is the kernel's
//     word, not the owner record's: the processes with a descriptor open
//     on the open file description that holds the lock (any of them can
//     unlock it, as `flock -u 3` in a background subshell does); for
//     other protocols, the live holder the record names. A keeper that is
//     not a runner must have one thread (the one that waits), and no
//     process started below the chain's top may be one this process
//     cannot look at (a set-user-ID program of this user that inherited
//     a descriptor); a description passed over a socket to a process
//     outside the chain is not seen.
//
// A lock kept by anything else (a background process sharing the
// descriptor, an unrelated flock(1) holding it after the ancestor
// released) may be released, so the wait goes on; the check is made
// again while it waits (locks in this machine's file system), with
// growing pauses up to a second, so that a cycle that forms later (the
// shell reaches its wait) still fails then.
// A background successor (`hold run T -- sh -c 'hold run T -- job &'`)
// therefore waits for its parent's lock and gets it once that command
// ends. A parent that is not a runner (a Node or Python program holding T
// while it starts a child that waits for T) may release T at any time,
// so its child waits as usual. Outside Linux nothing is certain and
// nothing is reported.

// runners are this process's ancestors that run their command under a
// lock and wait for it, by pid, described for messages. Read once: an
// ancestor does not change, except that one which ends is gone (and a
// runner that is a child subreaper, as hold run is, stays an ancestor of
// the orphans of its command).
var runners = sync.OnceValue(func() map[int]string {
	var m map[int]string
	for _, p := range proc.Ancestors() {
		if waitsForCommand(p.Args) {
			if m == nil {
				m = map[int]string{}
			}
			m[p.PID] = strings.Join(p.Args, " ")
		}
	}
	return m
})

// waitsForCommand reports whether args are those of a process that holds
// a lock while its command runs and waits for it: hold run, hold update
// (its command), flock(1).
func waitsForCommand(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch strings.TrimSuffix(filepath.Base(args[0]), ".exe") {
	case "flock":
		return true
	case "hold", "hold-remote", "hold-postgres":
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "-") {
				continue
			}
			return a == "run" || a == "update"
		}
	}
	return false
}

// ancestorDeadlock returns the lock.ErrDeadlock error for req, whose lock was
// found busy (busy: the lock.ErrBusy error, naming the holder), when the rules
// above make the wait one that can never end; nil otherwise.
func (c *Config) ancestorDeadlock(req *lock.Request, busy error) error {
	var be *lock.Error
	if !errors.Is(busy, lock.ErrBusy) || !errors.As(busy, &be) {
		return nil
	}
	return c.ancestorCycle(req, func() *lock.Holder { return be.Holder })
}

// ancestorCycle is ancestorDeadlock for a lock whose holder, asked only
// once the chain of ancestors could be a cycle, is holder() (for a kernel
// lock it is only named in the error: the kernel decides).
func (c *Config) ancestorCycle(req *lock.Request, holderOf func() *lock.Holder) error {
	rs := runners()
	if len(rs) == 0 {
		return nil
	}
	// The chain: this process, then its ancestors as they are now (one
	// that ended is replaced by whoever adopted its children).
	chain := []int{os.Getpid()}
	for _, p := range proc.Ancestors() {
		chain = append(chain, p.PID)
	}
	// The caller this process serves (proc.WithCaller) waits for its answer:
	// it counts as this process.
	self := 0
	if c.Caller > 0 && len(chain) > 1 && chain[1] == c.Caller {
		self = 1
	}
	blocked := self
	for i := self + 1; i < len(chain); i++ {
		if kid, ok := proc.SoleChildWaiter(chain[i]); !ok || kid != chain[i-1] || !cannotActAlone(chain[i]) {
			break
		}
		blocked = i
	}
	if !slices.ContainsFunc(chain[self+1:blocked+1], func(pid int) bool { _, ok := rs[pid]; return ok }) {
		return nil
	}
	keepers, ok := c.keepers(req, holderOf, chain[:blocked+1])
	if !ok || len(keepers) == 0 {
		return nil
	}
	named := 0
	for _, k := range keepers {
		i := slices.Index(chain, k)
		if i < 0 || i > blocked {
			return nil
		}
		if i <= self {
			continue
		}
		if _, runner := rs[k]; runner {
			if named == 0 || slices.Index(chain, named) > i {
				named = k
			}
			continue
		}
		if proc.Threads(k) != 1 {
			return nil // another of its threads may unlock it
		}
		if named == 0 {
			named = k
		}
	}
	if named == 0 {
		return nil // kept by this process alone: selfDeadlock's question
	}
	what, ok := rs[named]
	if !ok {
		what = proc.Cmdline(named)
	}
	return &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrDeadlock, Holder: holderOf(),
		Hint: fmt.Sprintf("the holder, pid %d (%s), is an ancestor of this process (%s) that waits for it to end, so it cannot release the lock before this wait ends: do not take the lock again inside its own command", named, shorten(what, 60), c.whoAsks())}
}

// keepers returns the processes that keep req's lock, and whether they
// could be told: for a kernel lock the kernel's (proc.FlockKeepers), for
// others the live local holder the record names (holderOf). A kernel
// lock that a process /proc/locks names keeps, outside chain (the
// processes that could make a cycle), is no cycle: that answer (not ok)
// costs no look at every process's descriptors.
func (c *Config) keepers(req *lock.Request, holderOf func() *lock.Holder, chain []int) ([]int, bool) {
	if c.Protocol.Name() == "flock" {
		k, ok := proc.FileKeyOf(req.Path)
		if !ok {
			return nil, false
		}
		for _, pid := range proc.KernelHolders(k) {
			if !slices.Contains(chain, pid) && proc.Keeps(pid, k) {
				return nil, false
			}
		}
		keepers, unknown := proc.FlockKeepers(k)
		if len(keepers) == 0 {
			return nil, false
		}
		// A process that could not be looked at matters only if it
		// could have inherited the lock's description: one started
		// below the chain's top.
		for _, pid := range unknown {
			if proc.DescendsFrom(pid, chain) {
				return nil, false
			}
		}
		return keepers, true
	}
	holder := holderOf()
	if holder == nil || holder.Owner == nil {
		return nil, false
	}
	o := holder.Owner
	if o.PID <= 0 || !proc.Local(o) || proc.Judge(o) != lock.Alive {
		return nil, false
	}
	return []int{o.PID}, true
}

// waitWatchingAncestors is the protocol's Acquire for a process with a
// runner among its ancestors: while it waits, the deadlock check is made
// again, with pauses growing from 10 ms to a second, and a cycle found
// ends the wait with its lock.ErrDeadlock error. A lock on a server (a
// lock.Closer: etcd, PostgreSQL) is checked before the wait only, so
// that a wait costs the server no request a second.
func (c *Config) waitWatchingAncestors(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	if _, network := c.Protocol.(lock.Closer); network || len(runners()) == 0 {
		return c.Protocol.Acquire(ctx, req)
	}
	// The watch's goroutine has a copy of the config: capturing c would
	// move every caller's config to the heap, even Acquire's without
	// options, which keeps its own on the stack.
	cc := *c
	w := &cc
	return watchAncestors(ctx, func(ctx context.Context) (lock.Handle, error) { return w.Protocol.Acquire(ctx, req) }, func() error {
		holder := func() *lock.Holder {
			if st, err := w.Protocol.Inspect(req.Path); err == nil && st.State != lock.Free && st.State != lock.Stale {
				return st.Holder
			}
			return nil
		}
		return w.ancestorCycle(req, holder)
	})
}

// watchAncestors waits with acquire, making the deadlock check check
// again while it waits, with pauses growing from 10 ms to a second: an
// error it returns ends the wait with that error.
func watchAncestors(ctx context.Context, acquire func(context.Context) (lock.Handle, error), check func() error) (lock.Handle, error) {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		pause := 10 * time.Millisecond
		for {
			t := time.NewTimer(pause)
			select {
			case <-done:
				t.Stop()
				return
			case <-t.C:
			}
			pause = min(2*pause, time.Second)
			if derr := check(); derr != nil {
				cancel(derr)
				return
			}
		}
	}()
	h, err := acquire(wctx)
	close(done)
	<-watched
	if err != nil && ctx.Err() == nil {
		if cause := context.Cause(wctx); errors.Is(cause, lock.ErrDeadlock) {
			return nil, cause
		}
	}
	return h, err
}

// slotAncestorDeadlock is ancestorDeadlock for a wait for a slot of the
// kernel semaphore req names (Slots above 1), which found none free
// (busy: the lock.ErrBusy error): the wait can never end when the lock file
// itself is held exclusively, or each of the slots is, by processes that
// the rules above say cannot let go before it ends (hold run --slots 2 T
// -- hold run --slots 2 T -- hold run --slots 2 T, or hold run T -- hold
// run --slots 2 T). A slot kept by anyone else may be released, and so
// the wait goes on. nil when it may end.
func (c *Config) slotAncestorDeadlock(req *lock.Request, busy error) error {
	if busy != nil && !errors.Is(busy, lock.ErrBusy) || c.Protocol.Name() != "flock" || len(runners()) == 0 {
		return nil
	}
	holder := func() *lock.Holder {
		var be *lock.Error
		if errors.As(busy, &be) {
			return be.Holder
		}
		return nil
	}
	if k, ok := proc.FileKeyOf(req.Path); ok && proc.HeldExclusive(k) {
		return c.ancestorCycle(req, holder)
	}
	for i := range req.Slots {
		sr := *req
		sr.Path = flock.SlotPath(req.Path, i)
		k, ok := proc.FileKeyOf(sr.Path)
		if !ok || !proc.HeldExclusive(k) {
			return nil
		}
		if c.ancestorCycle(&sr, func() *lock.Holder { return nil }) == nil {
			return nil
		}
	}
	return &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrDeadlock, Holder: holder(),
		Hint: fmt.Sprintf("all %d slots are held by ancestors of this process (%s) that wait for it to end, so none can be released before this wait ends: do not take a slot again inside the command of its holders", req.Slots, c.whoAsks())}
}

// acquireSlotWatching is the semaphore's AcquireSlot for a process with
// a runner among its ancestors: the check above is made again while it
// waits, as waitWatchingAncestors does for a lock.
func (c *Config) acquireSlotWatching(ctx context.Context, sem lock.Semaphore, req *lock.Request) (lock.Handle, error) {
	if c.Protocol.Name() != "flock" || len(runners()) == 0 {
		return sem.AcquireSlot(ctx, req)
	}
	// A copy, as in waitWatchingAncestors: the config stays on the stack.
	cc := *c
	w := &cc
	return watchAncestors(ctx, func(ctx context.Context) (lock.Handle, error) { return sem.AcquireSlot(ctx, req) },
		func() error { return w.slotAncestorDeadlock(req, nil) })
}

// Deadlocks with itself through an inherited descriptor. `exec
// 9>b.lock; flock 9; hold run b -- true`: hold was started with the
// shell's descriptor 9, whose open file description holds b.lock's
// kernel lock, and now waits for that lock on a description of its own.
// The lock belongs to the description, which lasts while any descriptor
// of it is open: hold's own, which it never closes while it waits. So the
// wait can never end, unless another process with a descriptor of it
// unlocks it (flock -u 9): the shell could, from a trap, while it waits.
// inheritedDeadlock says so, at once, for a process that nothing in it can
// make let go (FailIfHeldHere: the hold command), when it is certain:
//
//  1. This process keeps the lock, in a mode that excludes the request,
//     through descriptors of its own, and none of its Locks holds it
//     (that is selfDeadlock's question, asked before the wait).
//  2. Every other process that keeps it (proc.FlockKeepers) is one of
//     this process's ancestors that wait for it to end and cannot act
//     on their own (the blocked chain of the ancestor check, each one
//     cannotActAlone), none of them a runner (hold run, flock(1): the
//     ancestor check names that one, hold run T -- hold run T), and none
//     that could not be looked at descends from that chain.
//
// The message names the descriptors, the process the lock was taken by
// (the kernel's word) and the ancestors that keep it too.

// inheritedDeadlock returns the lock.ErrDeadlock error for a wait of this
// process (FailIfHeldHere) for the kernel lock at path, shared or not,
// when the rules above make it one that can never end; nil otherwise.
// caller is the process this one serves (proc.WithCaller), 0 for none:
// then this process's descriptors are not the caller's, and nothing is
// claimed.
func inheritedDeadlock(path string, shared bool, caller int) error {
	self := os.Getpid()
	if caller > 0 && caller != self {
		return nil
	}
	k, ok := proc.FileKeyOf(path)
	if !ok {
		return nil
	}
	fds := proc.OwnKeeps(k, shared)
	if len(fds) == 0 {
		return nil
	}
	keepers, unknown := proc.FlockKeepers(k)
	chain := []int{self}
	for _, p := range proc.Ancestors() {
		pid := p.PID
		if kid, ok := proc.SoleChildWaiter(pid); !ok || kid != chain[len(chain)-1] || !cannotActAlone(pid) {
			break
		}
		chain = append(chain, pid)
	}
	if !slices.Contains(keepers, self) {
		return nil
	}
	var others []string
	for _, k := range keepers {
		if !slices.Contains(chain, k) {
			return nil // it may let go
		}
		if k != self {
			if waitsForCommand(proc.Args(k)) {
				return nil // a runner keeps it: the ancestor check's word
			}
			others = append(others, fmt.Sprintf("pid %d (%s)", k, shorten(oneLine(proc.Cmdline(k)), 60)))
		}
	}
	for _, pid := range unknown {
		if proc.DescendsFrom(pid, chain) {
			return nil
		}
	}
	var b strings.Builder
	fds2 := make([]string, len(fds))
	for i, fd := range fds {
		fds2[i] = strconv.Itoa(fd)
	}
	fmt.Fprintf(&b, "the holder is this very process (pid %d, %s) through its descriptor %s, which it was started with, already holding the lock", self, shorten(oneLine(proc.Cmdline(self)), 60), strings.Join(fds2, ", "))
	if by := proc.KernelHolders(k); len(by) > 0 {
		if c := proc.Cmdline(by[0]); c != "" {
			fmt.Fprintf(&b, " (taken by pid %d, %s)", by[0], shorten(oneLine(c), 60))
		} else {
			fmt.Fprintf(&b, " (taken by pid %d, which has ended)", by[0])
		}
	}
	if len(others) > 0 {
		fmt.Fprintf(&b, "; %s keeps it too, and waits for this process to end", strings.Join(others, ", "))
	}
	fmt.Fprintf(&b, ": the lock lasts while that descriptor is open, so this wait can never end; close it for this command (%s>&-) or unlock it first (flock -u %s)", fds2[0], fds2[0])
	return &lock.Error{Op: "acquire", Path: path, Err: lock.ErrDeadlock, Hint: b.String()}
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
