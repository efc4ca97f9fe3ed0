package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"

	"github.com/hold-dev/hold/internal/proc"
	"github.com/hold-dev/hold/lock"
)

// Acquire waits until the lock at req.Path (the key prefix) is held or ctx
// ends. Waiters are served in the order they queued. When ctx ends, or etcd
// stops answering, the waiting key's lease is revoked so that the
// abandoned wait never holds up the queue.
func (p *Protocol) Acquire(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(err)}
	}
	return p.acquire(ctx, req, true)
}

// TryAcquire takes the lock if nobody holds or waits for it, and never
// waits; otherwise it returns an error matching hold.ErrBusy that names the
// holder. Its round trips are bounded by the request timeout.
func (p *Protocol) TryAcquire(req *lock.Request) (lock.Handle, error) {
	return p.acquire(context.Background(), req, false)
}

// revoke ends a lease, which deletes every key bound to it, waiting at
// most wait for it (when etcd is healthy a revoke takes a millisecond).
// If that fails it goes on in the background (see persist) for up to
// revokeRetryFor beyond the TTL: a lease whose revoke failed during an
// outage is then still revoked as soon as etcd is back, instead of holding
// up the queue for up to a TTL after the restart (etcd renews every
// lease's TTL when it starts). Nobody renews a lease that is revoked, so
// past that time it has expired by itself.
func (p *Protocol) revoke(id clientv3.LeaseID, wait time.Duration) {
	_ = p.persist(wait, nil, time.Now().Add(p.ttl+revokeRetryFor), func(ctx context.Context) bool {
		_, err := p.client.Revoke(ctx, id)
		return revoked(p, err)
	})
}

// removeKey deletes one lock's key from the shared lease s, if the key is
// still that lock's: bound to s and, when rev is known (not 0), created at
// rev, so that a delete that comes late never takes a later acquisition's
// key of the same name (a slot is reused once its key is gone). It waits
// at most wait, and reports whether the key was deleted (or found gone)
// in that time.
//
// A key that could not be deleted would hold the lock for as long as this
// process renews the lease, which it goes on doing for its other locks and
// after an outage (a restarted etcd renews every lease): so the delete goes
// on in the background, with no time limit, until it succeeds or the lease
// ends (which deletes the key too) or the client is closed, or etcd refuses
// it for good.
func (p *Protocol) removeKey(key string, rev int64, s *session, wait time.Duration) bool {
	cmp := []clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(key), "=", s.id)}
	if rev > 0 {
		cmp = append(cmp, clientv3.Compare(clientv3.CreateRevision(key), "=", rev))
	}
	return p.persist(wait, s.done, time.Time{}, func(ctx context.Context) bool {
		_, err := p.client.Txn(ctx).If(cmp...).Then(clientv3.OpDelete(key)).Commit()
		// An error another attempt cannot cure (permission denied) ends
		// the retries too: the key then goes with the lease.
		return err == nil || p.client.Ctx().Err() != nil || !transient(err)
	})
}

// persist runs attempt, once in the foreground for at most wait when wait
// is positive, and then in the background until it reports success, gone
// is closed, the client is closed, or until has passed (never, when until
// is zero). While the client has no connection, each failed attempt has it
// dial again at once, not after gRPC's growing back-off, so that the next
// attempt after an outage comes soon after etcd is back. It reports
// whether the foreground attempt succeeded.
func (p *Protocol) persist(wait time.Duration, gone <-chan struct{}, until time.Time, attempt func(ctx context.Context) bool) bool {
	if wait > 0 {
		// The usual case, a healthy cluster: one round trip, here.
		ctx, cancel := context.WithTimeout(p.client.Ctx(), min(wait, p.reqTimeout))
		ok := attempt(ctx)
		cancel()
		if ok {
			return true
		}
	}
	go func() {
		for {
			ctx, cancel := context.WithTimeout(p.client.Ctx(), p.reqTimeout)
			ok := attempt(ctx)
			cancel()
			if ok || (!until.IsZero() && time.Now().After(until)) {
				return
			}
			if !p.connected() {
				p.client.ActiveConnection().ResetConnectBackoff()
			}
			select {
			case <-time.After(revokeRetryPause):
			case <-gone:
				return
			case <-p.client.Ctx().Done():
				return
			}
		}
	}()
	return false
}

// revoked reports whether a revoke needs no retry: it worked, the lease is
// gone already, or the client is closed.
func revoked(p *Protocol, err error) bool {
	return err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) || p.client.Ctx().Err() != nil
}

// How a revoke or a delete that failed is retried in the background:
// revokeRetryFor bounds a revoke's retries beyond the TTL (a variable so
// that a test can shorten it; a delete has no such bound).
var revokeRetryFor = time.Minute

const revokeRetryPause = 250 * time.Millisecond

// abandonWait is how long a failed acquisition waits for its key's
// deletion before it returns and leaves the rest to the background.
const abandonWait = 500 * time.Millisecond

// rpc bounds one round trip by the request timeout as well as ctx.
func (p *Protocol) rpc(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.reqTimeout)
}

// waiter is one acquisition on its way to the lock.
type waiter struct {
	p      *Protocol
	req    *lock.Request
	prefix string
	// shared asks for a reader's key; slots, above 1, for a place in a
	// semaphore of that many slots.
	shared bool
	slots  int
	waits  bool // Acquire, not TryAcquire
	// ahead is the range of the keys this waiter waits for, when they
	// were created before its own (see keys.go): every key for an
	// exclusive waiter, every key but the readers' for a reader, the
	// semaphore's own keys for a semaphore's waiter.
	ahead  keyRange
	slot   uint64 // this process's number for the key under prefix
	key    string
	rev    int64 // create revision of key: the queue position and fencing token
	sess   *session
	owner  lock.Owner
	holder *lock.Holder // the holder last seen, for messages
	// stopWithin is the request's StopWithin, for the held lock.
	stopWithin time.Duration
	// failures counts the round trips that failed in a row while etcd
	// was unreachable, for the back-off; noticed says the outage was
	// reported.
	failures int
	noticed  bool
}

func (p *Protocol) acquire(ctx context.Context, req *lock.Request, wait bool) (lock.Handle, error) {
	return p.acquireAs(ctx, req, wait, 0)
}

// acquireAs takes the lock at req.Path, or with slots above 1 a place in
// the semaphore of that many slots there.
func (p *Protocol) acquireAs(ctx context.Context, req *lock.Request, wait bool, slots int) (lock.Handle, error) {
	if err := checkKey(req.Path); err != nil {
		return nil, err
	}
	if slots > 1 && req.Shared {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.ErrInvalidOption,
			Hint: "a semaphore's slots are exclusive places: ask for slots or for a shared lock, not both"}
	}
	w := &waiter{p: p, req: req, prefix: req.Path + "/", owner: req.Owner, shared: req.Shared, waits: wait}
	switch {
	case slots > 1:
		w.slots = slots
		w.ahead = slotsRange(w.prefix, slots)
	case req.Shared:
		w.ahead = readerRange(w.prefix)
	default:
		w.ahead = allRange(w.prefix)
	}
	if w.owner.ID == "" {
		w.owner.ID = lock.NewID()
	}
	w.owner.Protocol = "etcd"
	w.owner.Shared = req.Shared
	w.owner.Fence = 0
	w.owner.Command = redact(w.owner.Command, p.redactFlags)
	w.owner.StartedAt = time.Now()

	budget := p.budget(req.StopWithin)
	if budget < minBudget {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: errTooShort,
			Hint: fmt.Sprintf("a lease TTL of %s leaves no time to renew it once %s (to stop the command) and a safety margin of %s are kept back; use a TTL of at least %s",
				p.ttl, req.StopWithin, safetyMargin(p.ttl), (req.StopWithin+minBudget+safetyMargin(p.ttl)).Round(time.Second)+time.Second)}
	}
	w.stopWithin = req.StopWithin
	for leaseRetried := false; ; {
		sess, err := p.session(ctx, budget)
		if err != nil {
			err = p.opError("acquire", req.Path, ctx, err, w.holder)
			if wait {
				if err = w.outlast(ctx, err); err == nil {
					continue // etcd answers again, or the pause is over
				}
			}
			return nil, err
		}
		w.sess = sess
		// The lease is the process's, so the key also names a slot:
		// two locks of one process on one prefix queue like any two.
		w.slot = p.takeSlot(w.prefix)
		w.key = w.keyName()
		w.rev = 0 // unknown until etcd says (the last attempt's key is gone)
		var h *handle
		if w.slots > 1 {
			h, err = w.runSlots(ctx, wait)
		} else {
			h, err = w.run(ctx, wait)
		}
		if err == nil {
			if w.slots > 1 {
				return &slotHandle{h}, nil
			}
			return h, nil
		}
		switch {
		case errors.Is(err, rpctypes.ErrLeaseNotFound) && (wait || !leaseRetried):
			// The lease ended before its keep-alive told us (it
			// was revoked): take a new one.
			leaseRetried = true
			p.freeSlot(w.prefix, w.slot)
			p.dropSession(sess)
			continue
		case wait && ctx.Err() == nil && errors.Is(err, errRequeue):
			// The waiter's lease ended (an outage longer than the
			// TTL) or its key was deleted: queue again, at the back.
			if l := req.Logger; l != nil {
				l.Debug("hold: queueing again", "path", req.Path, "key", w.key, "why", err.Error())
			}
			// The key is gone (etcd said so, or it went with the
			// lease): its slot is free, and no delete may follow it,
			// which could take the key queued next on the same slot.
			select {
			case <-sess.done:
				p.dropSession(sess)
			default:
			}
			p.freeSlot(w.prefix, w.slot)
			continue
		}
		if p.removeKey(w.key, w.rev, sess, abandonWait) {
			p.freeSlot(w.prefix, w.slot)
		}
		return nil, err
	}
}

// keyName is the waiter's key under its prefix (see keys.go).
func (w *waiter) keyName() string {
	switch {
	case w.slots > 1:
		return fmt.Sprintf("%s%s%d-%x-%x", w.prefix, slotsMark, w.slots, w.sess.id, w.slot)
	case w.shared:
		return fmt.Sprintf("%s%s%x-%x", w.prefix, readerMark, w.sess.id, w.slot)
	}
	return fmt.Sprintf("%s%x-%x", w.prefix, w.sess.id, w.slot)
}

// errTooShort refuses a lock whose StopWithin the lease TTL cannot cover.
var errTooShort = errors.New("the lease TTL is too short for the time the holder needs to stop (StopWithin)")

// minBudget is the least time a lock may be left to go without an
// acknowledged keep-alive: a few round trips.
const minBudget = 500 * time.Millisecond

// errRequeue means a waiter lost its place in the queue: its lease ended
// or its key was deleted while it waited. It queues again.
var errRequeue = errors.New("this waiter's key was deleted or its lease ended while it waited")

// takeSlot returns the smallest slot number no lock of this process uses
// on prefix. Keys are reused this way, not made unique per acquisition:
// etcd keeps a deleted key in its index until the history is compacted,
// and every read of the queue walks the prefix's keys, deleted ones
// included, so fresh keys would make each acquisition slower than the last.
func (p *Protocol) takeSlot(prefix string) uint64 {
	p.slotsMu.Lock()
	defer p.slotsMu.Unlock()
	if p.slots == nil {
		p.slots = map[string]map[uint64]bool{}
	}
	used := p.slots[prefix]
	if used == nil {
		used = map[uint64]bool{}
		p.slots[prefix] = used
	}
	var n uint64
	for used[n] {
		n++
	}
	used[n] = true
	return n
}

// freeSlot makes a slot available again once its key is known to be
// deleted. A slot whose key may still exist (etcd did not answer) is never
// freed, so that no later acquisition takes that key for its own.
func (p *Protocol) freeSlot(prefix string, n uint64) {
	p.slotsMu.Lock()
	defer p.slotsMu.Unlock()
	delete(p.slots[prefix], n)
	if len(p.slots[prefix]) == 0 {
		delete(p.slots, prefix)
	}
}

func (w *waiter) run(ctx context.Context, wait bool) (*handle, error) {
	p := w.p
	put := clientv3.OpPut(w.key, string(w.owner.Encode()), clientv3.WithLease(w.sess.id))
	resp, err := w.firstTxn(ctx, wait, func(ctx context.Context) (resp *clientv3.TxnResponse, err error) {
		if wait {
			// Read the queue as it was before our key joined it: its
			// newest key (our predecessor) and how many keys it has.
			// One round trip, as in concurrency.Mutex, and one read:
			// no key means the lock is ours, and a single key is the
			// holder as well as our predecessor. (Reading the oldest
			// key too, the holder, would cost a second range on every
			// acquisition for what only a waiter behind other waiters
			// needs to know, and wait reads it then anyway.) The key
			// exists already only if an earlier attempt was applied
			// but its answer lost.
			// A reader reads only the keys it waits for: those
			// that are not readers'.
			resp, err = p.client.Txn(ctx).If(
				clientv3.Compare(clientv3.CreateRevision(w.key), "=", 0),
			).Then(
				clientv3.OpGet(w.ahead.start, w.ahead.newest(0)...),
				put,
			).Else(clientv3.OpGet(w.key)).Commit()
		} else {
			// Take the lock only if nobody holds it or waits for
			// it (for a reader: no writer).
			resp, err = p.client.Txn(ctx).If(w.ahead.none()).Then(put).Else(
				clientv3.OpGet(w.ahead.start, w.ahead.oldest(1)...),
			).Commit()
		}
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	if !wait {
		if resp.Succeeded {
			w.rev = resp.Header.Revision
			return w.held(), nil
		}
		first := firstKV(resp.Responses[0])
		if first != nil && string(first.Key) == w.key {
			w.rev = first.CreateRevision // an earlier attempt took it
			return w.held(), nil
		}
		return nil, &lock.Error{Op: "acquire", Path: w.req.Path, Err: lock.ErrBusy, Holder: holderOf(first)}
	}
	if !resp.Succeeded {
		mine := firstKV(resp.Responses[0])
		if mine == nil {
			return nil, &lock.Error{Op: "acquire", Path: w.req.Path, Err: errRequeue}
		}
		w.rev = mine.CreateRevision
		return w.wait(ctx, queue{})
	}
	w.rev = resp.Header.Revision
	ahead := resp.Responses[0].GetResponseRange()
	pred := firstKV(resp.Responses[0])
	if pred == nil {
		// Nobody in front: the lock is ours, if the lease is sure to
		// outlive the answer's way here (see grant).
		if h, err := w.grant(ctx, false); h != nil || err != nil {
			return h, err
		}
		return w.wait(ctx, queue{})
	}
	// The count is of every key in the range, whatever the limit (the
	// API says so); More says the same from the other side.
	predHolds := ahead.Count == 1 && !ahead.More
	if predHolds {
		w.holder = holderOf(pred)
	}
	if l := w.req.Logger; l != nil {
		l.Debug("hold: waiting for lock", "path", w.req.Path, "key", w.key, "holder", w.holder.String())
	}
	q := queue{pred: string(pred.Key), predHolds: predHolds}
	return w.wait(ctx, q)
}

// queue is what a waiter knows of the keys in front of it.
type queue struct {
	// pred is the newest key created before ours; "" when unknown.
	pred string
	// predHolds says pred was the oldest key when last read: no key can
	// be older than it, since every key created later is newer than ours,
	// so when pred is deleted the lock is ours.
	predHolds bool
}

// wait waits in the queue until every key created before ours is gone.
//
// It watches only its immediate predecessor, so a release wakes one waiter.
// The watch starts at the current revision, which etcd serves as soon as an
// event happens (a watch from a past revision would first be caught up by
// the server's 100 ms resync loop). Because the predecessor may have gone
// before the watch started, the wait then re-reads the queue. When the
// predecessor is deleted, the lock is ours at once if it was the holder
// (and our lease is sure to be alive: see grant); otherwise (a waiter in
// front gave up) one read tells who is in front now.
// Waiting writes nothing: the owner record gets its acquisition time after
// the lock is taken, off the hand-off's path.
func (w *waiter) wait(ctx context.Context, q queue) (*handle, error) {
	p := w.p
	ctx = w.watching(ctx)
	for {
		if q.pred == "" {
			var err error
			if q, err = w.check(ctx); err != nil {
				if err := w.outlast(ctx, err); err != nil {
					return nil, err
				}
				continue
			}
			if q.pred == "" {
				if h, err := w.grant(ctx, true); h != nil || err != nil {
					return h, err
				}
				continue // renewed: read the queue again
			}
		}
		wctx, wcancel := context.WithCancel(ctx)
		wch := p.client.Watch(clientv3.WithRequireLeader(wctx), q.pred,
			clientv3.WithCreatedNotify(), clientv3.WithFilterPut())
		started, err := w.await(ctx, wch, nil)
		if err != nil {
			wcancel()
			return nil, err
		}
		if !started {
			// The watch failed (no leader, a reconnect): start again.
			wcancel()
			if !p.connected() {
				err = &lock.Error{Op: "acquire", Path: w.req.Path, Err: fmt.Errorf("%w: %s", ErrUnreachable, connectionProblem(p.client))}
				if err := w.outlast(ctx, err); err != nil {
					return nil, err
				}
				continue
			}
			if err := w.pause(ctx); err != nil {
				return nil, err
			}
			continue
		}
		now, err := w.check(ctx)
		if err != nil {
			wcancel()
			if err := w.outlast(ctx, err); err != nil {
				return nil, err
			}
			continue // watch again: events may have been missed
		}
		if now.pred != q.pred {
			// Gone before the watch started, or a waiter in front of
			// us gave up: wait on whoever is in front now.
			wcancel()
			if now.pred == "" {
				if h, err := w.grant(ctx, true); h != nil || err != nil {
					return h, err
				}
				q = queue{}
				continue
			}
			q = now
			continue
		}
		q = now
		gone, err := w.await(ctx, wch, nil)
		wcancel()
		if err != nil {
			return nil, err
		}
		if gone && q.predHolds {
			if h, err := w.grant(ctx, true); h != nil || err != nil {
				return h, err
			}
		}
		q = queue{} // read the queue again
	}
}

// check reads the queue in front of our key, without writing: a read-only
// transaction is served by etcd without a raft round.
func (w *waiter) check(ctx context.Context) (queue, error) {
	var resp *clientv3.TxnResponse
	err := w.p.call(ctx, func(ctx context.Context, _ bool) (err error) {
		resp, err = w.p.client.Txn(ctx).Then(
			clientv3.OpGet(w.key, clientv3.WithKeysOnly()),
			clientv3.OpGet(w.ahead.start, w.ahead.newest(w.rev-1, clientv3.WithKeysOnly())...),
			clientv3.OpGet(w.ahead.start, w.ahead.oldest(1)...),
		).Commit()
		return err
	})
	if err != nil {
		return queue{}, w.p.opError("acquire", w.req.Path, ctx, err, w.holder)
	}
	if mine := firstKV(resp.Responses[0]); mine == nil || mine.CreateRevision != w.rev {
		return queue{}, &lock.Error{Op: "acquire", Path: w.req.Path, Err: errRequeue}
	}
	w.failures = 0
	first := firstKV(resp.Responses[2])
	w.holder = holderOf(first)
	pred := firstKV(resp.Responses[1])
	if pred == nil {
		return queue{}, nil
	}
	return queue{pred: string(pred.Key), predHolds: first != nil && string(first.Key) == string(pred.Key)}, nil
}

// await waits for the next message on a watch: its creation when
// relevant is nil, otherwise an event relevant says matters (a plain
// lock's waiter watches its predecessor with puts filtered, so any
// message is the creation or the deletion; a semaphore's first waiter
// watches a range). It reports false when the watch ended without one,
// and an error when ctx ended or the session did. It is the one place an
// etcd waiter blocks between two reads of its queue.
func (w *waiter) await(ctx context.Context, wch clientv3.WatchChan, relevant func(ev *clientv3.Event) bool) (bool, error) {
	// The client's watch waits through an outage by itself; look at
	// the connection now and then, to say so.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if !w.p.connected() {
				w.notify(&lock.Error{Op: "acquire", Path: w.req.Path, Err: fmt.Errorf("%w: %s", ErrUnreachable, connectionProblem(w.p.client))})
			}
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil || wr.Canceled {
				if ctx.Err() != nil {
					return false, w.ctxError(ctx)
				}
				return false, nil
			}
			// A session that ended wins over an event that raced it:
			// etcd may have sent the event long before the keep-alive
			// that says the lease is gone, while the connection was
			// stalled.
			select {
			case <-w.sess.done:
				return false, w.sessionError()
			default:
			}
			if relevant == nil || slices.ContainsFunc(wr.Events, relevant) {
				return true, nil
			}
		case <-ctx.Done():
			return false, w.ctxError(ctx)
		case <-w.sess.done:
			return false, w.sessionError()
		}
	}
}

// firstTxn makes the waiter's first transaction, the one that enqueues
// its key or takes the lock, until etcd answers: a failed round trip ends
// a try (wait false) at once, and a wait only as outlast decides. The key
// may exist if an earlier attempt was applied but its answer lost: txn's
// Else branch finds it.
func (w *waiter) firstTxn(ctx context.Context, wait bool, txn func(context.Context) (*clientv3.TxnResponse, error)) (*clientv3.TxnResponse, error) {
	for {
		var resp *clientv3.TxnResponse
		err := w.p.call(ctx, func(ctx context.Context, _ bool) (err error) {
			resp, err = txn(ctx)
			return err
		})
		if err == nil {
			w.failures = 0
			return resp, nil
		}
		err = w.p.opError("acquire", w.req.Path, ctx, err, w.holder)
		if !wait {
			return nil, err
		}
		if err = w.outlast(ctx, err); err != nil {
			return nil, err
		}
	}
}

// outlast decides what a failed round trip means to a waiter. While etcd
// is unreachable the waiter keeps waiting, with a growing pause between
// attempts, until its context ends: its lease outlives a short outage (a
// restarted etcd renews every lease), and if the lease ended meanwhile the
// waiter queues again (errRequeue). The first time, it says so once
// (WithOutageNotice). Any other error ends the wait now.
func (w *waiter) outlast(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return w.ctxError(ctx)
	}
	if !errors.Is(err, ErrUnreachable) || w.p.client.Ctx().Err() != nil {
		return err
	}
	w.notify(err)
	w.failures++
	// Have the client dial again at once rather than after gRPC's
	// growing back-off, so that the wait goes on soon after etcd is back.
	w.p.client.ActiveConnection().ResetConnectBackoff()
	return w.sleep(ctx, min(time.Duration(1<<min(w.failures, 6))*25*time.Millisecond, maxOutagePause))
}

// notify says, once per acquisition, that etcd is unreachable and the
// waiter keeps trying.
func (w *waiter) notify(err error) {
	if !w.noticed && w.p.notice != nil {
		w.noticed = true
		w.p.notice(fmt.Sprintf("hold: %s: %v; hold keeps trying until the wait ends", w.req.Path, unwrapHold(err)))
	}
}

// maxOutagePause is the longest pause between two attempts to reach etcd
// while a waiter rides out an outage.
const maxOutagePause = time.Second

// unwrapHold returns what an *lock.Error wraps, for a message that names
// the lock itself.
func unwrapHold(err error) error {
	var e *lock.Error
	if errors.As(err, &e) && e.Err != nil {
		return e.Err
	}
	return err
}

// pause waits a moment before a failed watch is started again.
func (w *waiter) pause(ctx context.Context) error {
	return w.sleep(ctx, 50*time.Millisecond)
}

// sleep waits d, or until ctx ends or the waiter's lease does.
func (w *waiter) sleep(ctx context.Context, d time.Duration) error {
	var gone <-chan struct{}
	if w.sess != nil {
		gone = w.sess.done
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return w.ctxError(ctx)
	case <-gone:
		return w.sessionError()
	}
}

// grant turns a waiter that found itself at the front of the queue into a
// held lock (with after, one that waited: see heldAfterWait), unless its
// lease may have ended meanwhile. The news that the lock is ours (a watch
// event, a read of the queue) says nothing about our own key: a waiter cut
// off for longer than its TTL had its lease expire and its key deleted,
// the waiters behind it went ahead, and the deletion of its predecessor,
// buffered by etcd, may reach it before the keep-alive that says the lease
// is gone. So the lock is granted only while the lease's loss deadline
// (the one a held lock would have, see lossDeadline) is still ahead; past
// it, grant waits for the next acknowledged keep-alive, after which the
// caller reads the queue again (our key included), or for the session's
// end (errRequeue: queue again). It returns nil and no error when the
// caller is to read the queue again.
func (w *waiter) grant(ctx context.Context, after bool) (*handle, error) {
	select {
	case <-w.sess.done:
		return nil, w.sessionError()
	default:
	}
	deadline, renewed := w.p.lossDeadline(w.sess, w.stopWithin)
	if time.Now().Before(deadline) {
		switch {
		case w.slots > 1:
			return w.heldPlace(ctx)
		case after:
			return w.heldAfterWait(), nil
		}
		return w.held(), nil
	}
	if l := w.req.Logger; l != nil {
		l.Debug("hold: front of the queue, but no keep-alive confirmed the lease in time; waiting for one",
			"path", w.req.Path, "key", w.key, "deadline", deadline.Format("15:04:05.000"))
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-renewed:
			return nil, nil
		case <-w.sess.done:
			return nil, w.sessionError()
		case <-ctx.Done():
			return nil, w.ctxError(ctx)
		case <-tick.C:
			if !w.p.connected() {
				w.notify(&lock.Error{Op: "acquire", Path: w.req.Path, Err: fmt.Errorf("%w: %s", ErrUnreachable, connectionProblem(w.p.client))})
			}
		}
	}
}

// held turns the waiter into a held lock and starts watching for its loss.
func (w *waiter) held() *handle {
	w.owner.Fence = w.fence()
	h := newHandle(w.p, w.req.Path, w.slot, w.key, w.rev, w.sess, w.owner, w.stopWithin, nil, false)
	if l := w.req.Logger; l != nil {
		l.Debug("hold: acquired", "path", w.req.Path, "key", w.key, "fence", w.rev)
	}
	return h
}

// fence is the fencing token of the waiter once it holds the lock: its
// key's create revision, for an exclusive hold or a semaphore's place. A
// shared hold has none (0, see handle.TokenError): readers hold together,
// so no order among them could fence a write.
func (w *waiter) fence() uint64 {
	if w.shared {
		return 0
	}
	return uint64(w.rev)
}

// heldAfterWait turns a waiter that reached the front of the queue into a
// held lock, and has the owner record rewritten with the time the lock was
// taken (the record written when it queued has the time it queued).
func (w *waiter) heldAfterWait() *handle {
	w.owner.StartedAt = time.Now()
	w.owner.Fence = w.fence()
	h := newHandle(w.p, w.req.Path, w.slot, w.key, w.rev, w.sess, w.owner, w.stopWithin, w.owner.Encode(), true)
	if l := w.req.Logger; l != nil {
		l.Debug("hold: acquired", "path", w.req.Path, "key", w.key, "fence", w.rev)
	}
	return h
}

// ctxError is the error of a wait that ctx ended. When etcd is unreachable
// at that moment, the hint says so: the wait may have been long only
// because nobody could be told the lock was free.
func (w *waiter) ctxError(ctx context.Context) error {
	e := &lock.Error{Op: "acquire", Path: w.req.Path, Err: lock.WaitError(ctx.Err()), Holder: w.holder}
	if !w.p.connected() {
		e.Hint = "etcd unreachable: " + connectionProblem(w.p.client)
	}
	return e
}

// sessionError is the error of a wait whose lease ended under it: the
// waiter queues again, unless the protocol or its client was closed.
func (w *waiter) sessionError() error {
	if err := w.p.client.Ctx().Err(); err != nil {
		return &lock.Error{Op: "acquire", Path: w.req.Path, Err: fmt.Errorf("the etcd client was closed: %w", err)}
	}
	if w.p.isClosed() {
		return &lock.Error{Op: "acquire", Path: w.req.Path, Err: errClosed}
	}
	return &lock.Error{Op: "acquire", Path: w.req.Path, Err: errRequeue}
}

// connected reports whether the client has a working connection.
func (p *Protocol) connected() bool {
	return p.client.ActiveConnection().GetState() == connectivity.Ready
}

// opError turns the error of a round trip into hold's error: the caller's
// ctx ending is a wait error, a round trip that timed out on its own is an
// unreachable cluster, anything else (permission denied, ...) is kept as is.
func (p *Protocol) opError(op, path string, ctx context.Context, err error, holder *lock.Holder) error {
	if ctx.Err() != nil {
		e := &lock.Error{Op: op, Path: path, Err: lock.WaitError(ctx.Err()), Holder: holder}
		if !p.connected() {
			e.Hint = "etcd unreachable: " + connectionProblem(p.client)
		}
		return e
	}
	if cerr := p.client.Ctx().Err(); cerr != nil {
		// Our own client was closed under the round trip (Close of a
		// protocol that Dial made): not an unreachable cluster.
		if p.isClosed() {
			return &lock.Error{Op: op, Path: path, Holder: holder, Err: errClosed}
		}
		return &lock.Error{Op: op, Path: path, Holder: holder, Err: fmt.Errorf("the etcd client was closed: %w", cerr)}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, rpctypes.ErrTimeout) ||
		errors.Is(err, rpctypes.ErrNoLeader) || !p.connected() {
		return &lock.Error{Op: op, Path: path, Holder: holder,
			Err: fmt.Errorf("%w: %v", ErrUnreachable, unreachableDetail(p, err))}
	}
	return &lock.Error{Op: op, Path: path, Err: err, Holder: holder}
}

func unreachableDetail(p *Protocol, err error) string {
	if p.connected() {
		return err.Error()
	}
	return fmt.Sprintf("no answer within %s: %s", p.reqTimeout, connectionProblem(p.client))
}

// firstKV returns the first key of a range response inside a transaction,
// or nil.
func firstKV(r *pb.ResponseOp) *mvccpb.KeyValue {
	rr := r.GetResponseRange()
	if rr == nil || len(rr.Kvs) == 0 {
		return nil
	}
	return rr.Kvs[0]
}

// holderOf describes the holder whose key is kv (nil: nobody).
func holderOf(kv *mvccpb.KeyValue) *lock.Holder {
	if kv == nil {
		return nil
	}
	h := &lock.Holder{}
	if o, ok := lock.DecodeOwner(kv.Value); ok {
		o.Fence = uint64(kv.CreateRevision)
		h.Owner = o
		h.Alive = proc.Judge(o)
	}
	return h
}

// redact hides the values of the given flags in a command line.
func redact(cmd []string, flags []string) []string {
	if len(flags) == 0 {
		return cmd
	}
	out := append([]string(nil), cmd...)
next:
	for i := 0; i < len(out); i++ {
		for _, f := range flags {
			switch {
			case out[i] == f && i+1 < len(out):
				out[i+1] = "***"
				i++
				continue next
			case strings.HasPrefix(out[i], f+"="):
				out[i] = f + "=***"
				continue next
			}
		}
	}
	return out
}
