package etcd

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hold-dev/hold/lock"
)

var _ lock.Semaphore = (*Protocol)(nil)

// AcquireSlot waits for a place in the semaphore of req.Slots slots at
// req.Path, or until ctx ends.
//
// Each holder and waiter has a key "<prefix>/s<N>-<lease>-<n>" bound to
// its lease, as a plain lock's waiter has; the N oldest keys by create
// revision hold, the others wait in create-revision order. A waiter does
// not watch the whole queue, so a release wakes no herd:
//
//   - the first waiter (N keys in front of it) watches the semaphore's
//     keys for deletions of keys older than its own: any holder's release
//     (or crash: its lease ends and its key with it) lets it in;
//   - every other waiter watches only the key just in front of it, which
//     is a waiter too. That key changes when it gives up (deleted) or when
//     it is let in: a holder claims its place by rewriting its key (see
//     claim), which wakes the waiter behind it, now the first waiter.
//
// So a release wakes the waiter it lets in, and that one's grant wakes the
// one behind it, and nobody else. The grant follows the plain lock's rules
// (see grant): only while the lease is sure to be alive, and never for a
// key that was deleted (the waiter queues again).
//
// The N is part of the key, so that a request with another N (or while a
// plain lock of the path is held or waited for) is refused, in the
// transaction that would enqueue it, while any key of the semaphore
// exists: ErrSlotCount, naming the N in use. Once every key is gone, any N
// may start anew. Readers hold beside the places, as on kernel locks.
func (p *Protocol) AcquireSlot(ctx context.Context, req *lock.Request) (lock.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, &lock.Error{Op: "acquire", Path: req.Path, Err: lock.WaitError(err)}
	}
	if req.Slots <= 1 {
		return p.acquire(ctx, req, true)
	}
	return p.acquireAs(ctx, req, true, req.Slots)
}

// TryAcquireSlot takes a place in the semaphore if one is free and nobody
// waits, and never waits: otherwise it returns an error matching
// hold.ErrBusy that names every holder.
func (p *Protocol) TryAcquireSlot(req *lock.Request) (lock.Handle, error) {
	if req.Slots <= 1 {
		return p.acquire(context.Background(), req, false)
	}
	return p.acquireAs(context.Background(), req, false, req.Slots)
}

// InspectSlots reports the semaphore at path: its N (0 when no key is
// there: etcd keeps nothing of a semaphore nobody holds) and the holder of
// each place. It is Inspect, which tells a semaphore by its keys.
func (p *Protocol) InspectSlots(path string) (*lock.Status, error) {
	return p.Inspect(path)
}

// runSlots enqueues the waiter's key in the semaphore and waits for a
// place (with wait), or takes one only if one is free.
func (w *waiter) runSlots(ctx context.Context, wait bool) (*handle, error) {
	p := w.p
	put := clientv3.OpPut(w.key, string(w.owner.Encode()), clientv3.WithLease(w.sess.id))
	below := keyRange{w.prefix, w.ahead.start}
	above := notSlotsRange(w.prefix, w.slots)
	resp, err := w.firstTxn(ctx, wait, func(ctx context.Context) (resp *clientv3.TxnResponse, err error) {
		// Enqueue only if no other kind of key is there, and read
		// the newest key in front (and, in its count, how many).
		resp, err = p.client.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(w.key), "=", 0),
			below.none(), above.none(),
		).Then(
			clientv3.OpGet(w.ahead.start, w.ahead.newest(0, clientv3.WithKeysOnly())...),
			put,
		).Else(
			clientv3.OpGet(w.key),
			clientv3.OpGet(below.start, below.oldest(1)...),
			clientv3.OpGet(above.start, above.oldest(1)...),
		).Commit()
		return resp, err
	})
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		if mine := firstKV(resp.Responses[0]); mine != nil {
			// An earlier attempt was applied, its answer lost.
			w.rev = mine.CreateRevision
			return w.waitSlots(ctx, wait)
		}
		return nil, w.slotCountError(firstKV(resp.Responses[1]), firstKV(resp.Responses[2]))
	}
	w.rev = resp.Header.Revision
	if int(resp.Responses[0].GetResponseRange().Count) < w.slots {
		if h, err := w.grant(ctx, false); h != nil || err != nil {
			return h, err
		}
	}
	return w.waitSlots(ctx, wait)
}

// slotCountError refuses a semaphore request that found keys of another
// kind at its path: below and above are the oldest such keys on either
// side of the semaphore's own range.
func (w *waiter) slotCountError(below, above *mvccpb.KeyValue) error {
	kv := below
	if kv == nil || above != nil && above.CreateRevision < kv.CreateRevision {
		kv = above
	}
	if kv == nil {
		// Gone again since: the caller may simply try again.
		return &lock.Error{Op: "acquire", Path: w.req.Path, Err: lock.ErrSlotCount,
			Hint: "another kind of lock was in use at this path a moment ago; try again"}
	}
	k := kindOf(string(kv.Key))
	hint := fmt.Sprintf("it is in use as %s, and a semaphore's N is its holders' while any of them holds or waits", k.describe())
	if k.slots > 0 {
		hint += fmt.Sprintf("; ask for %d slots, or wait until no slot is held to change N", k.slots)
	} else {
		hint += "; wait until it is free to use it as a semaphore"
	}
	return &lock.Error{Op: "acquire", Path: w.req.Path, Err: lock.ErrSlotCount, Holder: holderOf(kv), Hint: hint}
}

// position reads where the waiter's key is in the semaphore's queue: how
// many keys are in front of it (counted up to N+1: a holder, the first
// waiter, or one behind it), and the newest of them; errRequeue when its
// key is gone. (A range's count is of every key in the range, whatever
// its filters, so the keys in front are read, keys only.)
func (w *waiter) position(ctx context.Context) (int, string, error) {
	var resp *clientv3.TxnResponse
	err := w.p.call(ctx, func(ctx context.Context, _ bool) (err error) {
		resp, err = w.p.client.Txn(ctx).Then(
			clientv3.OpGet(w.key, clientv3.WithKeysOnly()),
			clientv3.OpGet(w.ahead.start, w.ahead.newest(w.rev-1, clientv3.WithKeysOnly())...),
			clientv3.OpGet(w.ahead.start, append(w.ahead.oldest(int64(w.slots+1)), clientv3.WithKeysOnly())...),
			clientv3.OpGet(w.ahead.start, w.ahead.oldest(1)...),
		).Commit()
		return err
	})
	if err != nil {
		return 0, "", w.p.opError("acquire", w.req.Path, ctx, err, w.holder)
	}
	if mine := firstKV(resp.Responses[0]); mine == nil || mine.CreateRevision != w.rev {
		return 0, "", &lock.Error{Op: "acquire", Path: w.req.Path, Err: errRequeue}
	}
	w.failures = 0
	w.holder = holderOf(firstKV(resp.Responses[3]))
	pred := ""
	if kv := firstKV(resp.Responses[1]); kv != nil {
		pred = string(kv.Key)
	}
	ahead := w.slots + 1
	for i, kv := range resp.Responses[2].GetResponseRange().Kvs {
		if kv.CreateRevision == w.rev {
			ahead = i
			break
		}
	}
	return ahead, pred, nil
}

// waitSlots waits in the semaphore's queue until fewer than N keys are in
// front of the waiter's, then claims a place (see AcquireSlot). Without
// wait it only looks: a place, or ErrBusy naming every holder.
func (w *waiter) waitSlots(ctx context.Context, wait bool) (*handle, error) {
	p := w.p
	if wait {
		ctx = w.watching(ctx)
	}
	for {
		ahead, pred, err := w.position(ctx)
		if err != nil {
			if !wait {
				return nil, err
			}
			if err := w.outlast(ctx, err); err != nil {
				return nil, err
			}
			continue
		}
		if ahead < w.slots {
			if h, err := w.grant(ctx, true); h != nil || err != nil {
				return h, err
			}
			continue // renewed: read the queue again
		}
		if !wait {
			return nil, w.busySlots()
		}
		// Watch what lets this waiter move (see AcquireSlot).
		wctx, wcancel := context.WithCancel(ctx)
		var wch clientv3.WatchChan
		var moved func(ev *clientv3.Event) bool
		inFront := false // the event was the deletion of a key in front
		if ahead == w.slots {
			wch = p.client.Watch(clientv3.WithRequireLeader(wctx), w.ahead.start,
				clientv3.WithRange(w.ahead.end), clientv3.WithPrevKV(), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
			moved = func(ev *clientv3.Event) bool {
				// A deletion of a key in front, or of our own (the
				// position read then says to queue again); without its
				// previous value (compacted away) it may be either.
				inFront = ev.PrevKv != nil && ev.PrevKv.CreateRevision < w.rev
				return ev.PrevKv == nil || ev.PrevKv.CreateRevision <= w.rev
			}
		} else {
			wch = p.client.Watch(clientv3.WithRequireLeader(wctx), pred, clientv3.WithCreatedNotify())
			moved = func(*clientv3.Event) bool { return true }
		}
		started, err := w.await(ctx, wch, nil)
		if err == nil && started {
			// What happened before the watch started is read again.
			var nowAhead int
			var nowPred string
			if nowAhead, nowPred, err = w.position(ctx); err == nil && nowAhead == ahead && nowPred == pred {
				_, err = w.await(ctx, wch, moved)
			}
		}
		wcancel()
		if err == nil && inFront {
			// The first waiter, and a key in front of it went: keys
			// in front only ever go, so fewer than N are left, and it
			// is let in without reading the queue again (the claim
			// reads it, and finds out if its own key went too).
			if h, err := w.grant(ctx, true); h != nil || err != nil {
				return h, err
			}
			continue
		}
		if err != nil {
			if err := w.outlast(ctx, err); err != nil {
				return nil, err
			}
			continue
		}
		if !started {
			if err := w.pause(ctx); err != nil {
				return nil, err
			}
		}
	}
}

// busySlots is the error of a TryAcquireSlot that found every place held:
// it names each holder.
func (w *waiter) busySlots() error {
	e := &lock.Error{Op: "acquire", Path: w.req.Path, Err: lock.ErrBusy, Holder: w.holder}
	if st, err := w.p.Inspect(w.req.Path); err == nil && st.Slots > 0 {
		e.Holder = st.Holder
		e.Hint = st.DescribeSlots()
	}
	return e
}

// retry decides what a failed round trip of a claim means: a waiter rides
// out an outage (outlast), a TryAcquireSlot gives up.
func (w *waiter) retry(ctx context.Context, err error) error {
	err = w.p.opError("acquire", w.req.Path, ctx, err, w.holder)
	if !w.waits {
		return err
	}
	return w.outlast(ctx, err)
}

// heldPlace claims a place for a waiter let into the semaphore, and turns
// it into a held lock.
//
// The place is the lowest one no other holder's record names. Two
// holders let in at once could both pick it, so the claim is a
// transaction that writes the place into the waiter's record only if
// every other holder's key is as it was read: a holder that claimed a
// place since (its key rewritten) or left (deleted) makes it fail, and
// the claim reads again. Of two claims of one place, the second always
// sees the first's write. The claim's revision is the holder's token. A holder let in later, when a key in front of
// it went, finds the claimed places in the records.
func (w *waiter) heldPlace(ctx context.Context) (*handle, error) {
	p := w.p
	for {
		var resp *clientv3.TxnResponse
		err := p.call(ctx, func(ctx context.Context, _ bool) (err error) {
			resp, err = p.client.Txn(ctx).Then(
				clientv3.OpGet(w.ahead.start, w.ahead.oldest(int64(w.slots))...),
			).Commit()
			return err
		})
		if err != nil {
			if err := w.retry(ctx, err); err != nil {
				return nil, err
			}
			continue
		}
		holders := resp.Responses[0].GetResponseRange().Kvs
		cmps := []clientv3.Cmp{
			clientv3.Compare(clientv3.CreateRevision(w.key), "=", w.rev),
			clientv3.Compare(clientv3.LeaseValue(w.key), "=", w.sess.id),
		}
		used := map[int]bool{}
		mine := false
		for _, kv := range holders {
			if string(kv.Key) == w.key {
				mine = true
				continue
			}
			if n, ok := placeOf(kv); ok {
				used[n] = true
			}
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision))
		}
		if !mine {
			// Keys in front only ever go, so ours is gone.
			return nil, &lock.Error{Op: "acquire", Path: w.req.Path, Err: errRequeue}
		}
		place := 0
		for used[place] {
			place++
		}
		w.owner.StartedAt = time.Now()
		w.owner.Fence = 0 // the claim's revision, known once it is made
		record := withPlace(w.owner.Encode(), place)
		var claim *clientv3.TxnResponse
		err = p.call(ctx, func(ctx context.Context, _ bool) (err error) {
			claim, err = p.client.Txn(ctx).If(cmps...).Then(
				clientv3.OpPut(w.key, string(record), clientv3.WithLease(w.sess.id)),
			).Else(clientv3.OpGet(w.key)).Commit()
			return err
		})
		if err != nil {
			if err := w.retry(ctx, err); err != nil {
				return nil, err
			}
			continue
		}
		// The token is the claim's revision: claims are made in the
		// order places are granted, so tokens rise from holder to holder
		// of every place (a key's create revision is its place in the
		// queue, and a holder let in early may claim after one let in
		// later).
		fence := claim.Header.GetRevision()
		if !claim.Succeeded {
			if kv := firstKV(claim.Responses[0]); kv != nil && kv.CreateRevision == w.rev && string(kv.Value) == string(record) {
				fence = kv.ModRevision // an earlier attempt was applied
			} else if kv == nil || kv.CreateRevision != w.rev {
				return nil, &lock.Error{Op: "acquire", Path: w.req.Path, Err: errRequeue}
			} else {
				continue // another holder moved: read again
			}
		}
		w.owner.Fence = uint64(fence)
		h := newHandle(p, w.req.Path, w.slot, w.key, w.rev, w.sess, w.owner, w.stopWithin, record, false)
		h.place = place
		if l := w.req.Logger; l != nil {
			l.Debug("hold: acquired", "path", w.req.Path, "key", w.key, "fence", fence, "slot", place, "slots", w.slots)
		}
		return h, nil
	}
}
