package deadlock

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/internal/waits"
	"github.com/hold-dev/hold/lock"
)

// Deadlocks between processes through a server's locks (etcd,
// PostgreSQL): the search of cycle.go, with the edges the server
// knows. A protocol that implements lock.WaitGraph says, once a wait has
// lasted DeadlockAfter, on the server what it waits for and which of its
// holds the wait keeps (the entry its ServerWatcher publish writes,
// readable by the same server user's other waiters only, gone with the
// waiter's lease or session), and lists the waits published there, each
// with the holds of its lock in the server's terms (Blockers) and the
// holds it keeps (Holds).
//
// The chain is followed as on this machine: from this wait to the one
// wait that keeps every blocker of its lock, and on; or, for a reader
// queued behind a waiting writer (whose one Blocker is that writer's
// Place in the queue), to the writer's own wait. A wait with a Deadline
// ends the chain, as on this machine. A blocker that no
// published wait keeps (a holder that does not wait, or waits without
// saying so: DeadlockAfter(0), another version of hold, another user, or
// a lock the wait does not keep), or blockers kept by more than one wait,
// end the chain: no claim. The rest is the same rule as on this machine: the cycle must be
// found twice a moment apart, the youngest wait (the latest Order, then
// the greatest ID) gives up with lock.ErrDeadlock, and the message names every
// process and lock.
//
// A cycle that crosses protocols (a kernel lock held by a process that
// waits for an etcd lock, or locks of two servers) is not followed: each
// search sees one server's waits, or this machine's, and the chain ends
// where they meet. That cycle is not claimed; its waits hang as before.

// WaitingOn starts the watch of a wait that its protocol can say on its
// server (lock.ServerWatcher).
func (w *cycleWatch) WaitingOn(ctx context.Context, publish lock.PublishWait) context.Context {
	if w.graph == nil {
		return w.Waiting(ctx)
	}
	return w.waiting(ctx, publish)
}

// serverLook bounds each round trip of the search to the server: a look
// that takes longer tells nothing this time.
const serverLook = 5 * time.Second

// beginServer publishes the wait on its server and returns it, as an
// entry of the search, with the look for a cycle through it there and the
// removal of the entry.
//
// Its round trips end when the wait does, so that a slow server never
// holds up the Acquire that got its lock; the entry is removed in the
// background for the same reason (until then it names a wait the server
// shows ended, which no reader takes).
func (st *cycleWait) beginServer(w *cycleWatch) (func() []cycleStep, func(), bool) {
	sctx, stop := context.WithCancel(st.ctx)
	go func() {
		<-st.done
		stop()
	}()
	publish := st.publish
	if p := st.repub.Swap(nil); p != nil {
		publish = *p // it started again before the delay was over
	}
	ctx, cancel := context.WithTimeout(sctx, serverLook)
	id, remove, err := publish(ctx, handlesOf(w.keptLocks(st.ctx)))
	cancel()
	if err != nil {
		return nil, nil, false
	}
	me := waits.Self()
	me.Proto = w.proto
	me.Path = w.path
	me.Shared = w.shared
	me.Name = id
	if w.caller > 0 && w.caller != me.PID {
		me.Caller, me.CallerCommand = w.caller, proc.Cmdline(w.caller)
	}
	// Only its Order, from the server, compares it with the others':
	// it is set from the list (serverCycle).
	find := func() []cycleStep {
		ctx, cancel := context.WithTimeout(sctx, serverLook)
		defer cancel()
		if p := st.repub.Swap(nil); p != nil {
			// The wait started again (queued again, on a new key or
			// session): the entry says the new one.
			go remove()
			id, remove = "", func() {}
			nid, nremove, err := (*p)(ctx, handlesOf(w.keptLocks(st.ctx)))
			if err != nil {
				return nil
			}
			id, remove, me.Name = nid, nremove, nid
		}
		if id == "" || !st.deadline.IsZero() {
			// A bounded wait is said (a chain that reaches it ends
			// there) but is no link of a cycle: nothing to look for.
			return nil
		}
		ws, err := w.graph.ServerWaits(ctx)
		if err != nil {
			return nil
		}
		cyc := serverCycle(ws, id)
		if cyc != nil {
			// This process's own words for itself, which the server's
			// record may have shortened.
			since := cyc[0].e.Since
			cyc[0].e = me
			cyc[0].e.Since = since
		}
		return cyc
	}
	return find, func() {
		r := remove
		go r()
	}, true
}

// serverCycle follows the chain of server waits from the one called me
// and returns the cycle through it, it first, or nil (see the top of
// this file).
func serverCycle(ws []lock.ServerWait, me string) []cycleStep {
	i := slices.IndexFunc(ws, func(w lock.ServerWait) bool { return w.ID == me })
	if i < 0 || len(ws) < 2 {
		return nil
	}
	cur := ws[i]
	if !cur.Deadline.IsZero() {
		return nil // a wait that ends by itself is no link of a deadlock
	}
	cyc := []cycleStep{{e: serverEntry(cur)}}
	for range len(ws) + 1 {
		if len(cur.Blockers) == 0 {
			return nil
		}
		next, queued := -1, false
		for j := range ws {
			place := len(cur.Blockers) == 1 && ws[j].Place != "" && cur.Blockers[0] == ws[j].Place
			if place || holdsAll(ws[j].Holds, cur.Blockers) {
				if next >= 0 {
					return nil // more than one wait: it may end
				}
				next, queued = j, place
			}
		}
		if next < 0 {
			return nil
		}
		w := ws[next]
		if !w.Deadline.IsZero() {
			return nil // it ends by itself, and the chain with it
		}
		if w.ID == me {
			if len(cyc) < 2 {
				return nil // its own lock: not a cycle between processes
			}
			cyc[0].queued = queued
			return cyc
		}
		if slices.ContainsFunc(cyc, func(s cycleStep) bool { return s.e.Name == w.ID }) {
			return nil // a cycle that is not through this wait
		}
		cyc = append(cyc, cycleStep{e: serverEntry(w), queued: queued})
		cur = w
	}
	return nil
}

// handlesOf returns the protocols' own handles (unwrapped) of locks.
func handlesOf(locks []*Held) []lock.Handle {
	var out []lock.Handle
	for _, l := range locks {
		h := l.h
		for {
			w, ok := h.(lock.Wrapper)
			if !ok {
				break
			}
			h = w.Unwrap()
		}
		out = append(out, h)
	}
	return out
}

// holdsAll reports whether every blocker is one of holds.
func holdsAll(holds, blockers []string) bool {
	for _, b := range blockers {
		if !slices.Contains(holds, b) {
			return false
		}
	}
	return true
}

// serverEntry is a server's wait as a step of the search, for its rules
// and its message.
func serverEntry(w lock.ServerWait) waits.Entry {
	o := w.Waiter
	return waits.Entry{PID: o.PID, ProcStart: o.ProcStart, Host: o.Host, Command: strings.Join(o.Command, " "),
		Path: w.Path, Since: w.Order, Name: w.ID, Shared: w.Shared}
}
