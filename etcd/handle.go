package etcd

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hold-dev/hold/lock"
)

// handle is one held lock: a key bound to this acquisition's lease.
//
// The key is ours while it exists with our create revision and our lease.
// Its value (the owner record) is ours to rewrite once, after a wait; any
// other write to it, and its deletion, mean the lock was lost.
type handle struct {
	p     *Protocol
	path  string
	slot  uint64 // the key's slot (see takeSlot)
	key   string
	rev   int64 // the key's create revision: queue position and fencing token
	place int   // a semaphore holder's place, 0 to N-1
	sess  *session
	owner lock.Owner
	// stopWithin is the request's StopWithin: the lock is declared lost
	// this long (and the safety margin) before its lease may expire.
	stopWithin time.Duration
	// record is the owner record as published after a wait, which the
	// watch must not take for someone else's write.
	record []byte

	lost lock.LostState

	// The key is watched only once someone asks for Lost (Do does, a
	// plain Acquire and Release need not): Check and Release ask etcd
	// themselves. The lease is watched from the start.
	watchCtx  context.Context
	stopWatch context.CancelFunc
	watchMu   sync.Mutex
	watching  bool
	stopped   bool
	watchers  sync.WaitGroup

	mu       sync.Mutex // serializes Release
	released bool
	relErr   error
}

// newHandle starts watching the key for loss. record, when not nil, is
// the value this holder writes to its key after it was created (which the
// watch must not take for someone else's write); with publish it is
// written in the background, otherwise it was written already.
func newHandle(p *Protocol, path string, slot uint64, key string, rev int64, sess *session, owner lock.Owner, stopWithin time.Duration, record []byte, publish bool) *handle {
	ctx, stop := context.WithCancel(context.Background())
	h := &handle{p: p, path: path, slot: slot, key: key, rev: rev, sess: sess, owner: owner,
		stopWithin: stopWithin, watchCtx: ctx, stopWatch: stop, record: record}
	if publish {
		go h.publish(ctx)
	}
	h.watchers.Add(1)
	go h.watchLease(ctx)
	return h
}

func (h *handle) Fence() uint64 { return h.owner.Fence }

// TokenError says why a shared hold has no fencing token.
func (h *handle) TokenError() error {
	if !h.owner.Shared {
		return nil
	}
	return &lock.Error{Op: "token", Path: h.path, Err: lock.ErrNoToken,
		Hint: "a shared hold on etcd has no fencing token: readers hold together, so only exclusive holders' tokens fence writes"}
}

// slotHandle is a held place of a semaphore: the handle of its key, with
// the place (lock.SlotHandle).
type slotHandle struct{ *handle }

// Slot is the place held, from 0 to N-1.
func (h *slotHandle) Slot() int      { return h.place }
func (h *handle) Owner() *lock.Owner { o := h.owner; return &o }

// Lost returns the channel closed on loss, and starts watching the key.
func (h *handle) Lost() <-chan struct{} {
	h.watchMu.Lock()
	if !h.watching && !h.stopped {
		h.watching = true
		h.watchers.Add(1)
		go h.watch(h.watchCtx)
	}
	h.watchMu.Unlock()
	return h.lost.Lost()
}

// watchLease marks the lock lost when its lease ended (etcd said so), and
// before that at its deadline (see lossDeadline) if no keep-alive was
// acknowledged in time to move it.
func (h *handle) watchLease(ctx context.Context) {
	defer h.watchers.Done()
	for {
		deadline, renewed := h.lossDeadline()
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-h.sess.done:
			t.Stop()
			if ctx.Err() == nil {
				h.markLost("its lease expired or was revoked")
			}
			return
		case <-renewed:
			t.Stop()
		case <-t.C:
			if ctx.Err() != nil || h.pastDeadline() {
				return
			}
		}
	}
}

// lossDeadline is when the lock is declared lost unless a keep-alive is
// acknowledged first (renewed is closed then): the earliest moment etcd
// may let the lease expire, the send time of the last acknowledged
// keep-alive plus the TTL, less the time the holder needs to stop
// (StopWithin) and a safety margin. Kubernetes' leader election does the
// same with its renew deadline, shorter than the lease.
func (h *handle) lossDeadline() (deadline time.Time, renewed <-chan struct{}) {
	return h.p.lossDeadline(h.sess, h.stopWithin)
}

// pastDeadline marks the lock lost if its deadline has passed, and says
// so.
func (h *handle) pastDeadline() bool {
	deadline, _ := h.lossDeadline()
	if time.Now().Before(deadline) {
		return false
	}
	expiry, _ := h.sess.expiry()
	h.markLost(fmt.Sprintf("no keep-alive of its lease was acknowledged in time: the lease may expire at %s, and the holder was told %s before that to stop",
		expiry.Format("15:04:05.000"), (h.stopWithin + safetyMargin(h.p.ttl)).Round(time.Millisecond)))
	return true
}

// ours is the condition that the key is still this holder's.
func (h *handle) ours() []clientv3.Cmp {
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(h.key), "=", h.rev),
		clientv3.Compare(clientv3.LeaseValue(h.key), "=", h.sess.id),
	}
}

func (h *handle) isOurs(kv *mvccpb.KeyValue) bool {
	return kv != nil && kv.CreateRevision == h.rev && clientv3.LeaseID(kv.Lease) == h.sess.id
}

// publish rewrites the owner record with the time the lock was taken and
// its fencing token, so that status shows them. It runs after Acquire has
// returned, to keep a write off the hand-off. If the key is gone by then,
// the lock was lost while it waited.
func (h *handle) publish(ctx context.Context) {
	var resp *clientv3.TxnResponse
	err := h.p.call(ctx, func(ctx context.Context, _ bool) (err error) {
		resp, err = h.p.client.Txn(ctx).If(h.ours()...).Then(
			clientv3.OpPut(h.key, string(h.record), clientv3.WithLease(h.sess.id)),
		).Commit()
		return err
	})
	if err != nil || resp.Succeeded {
		return // unreachable: the lease's keep-alive decides
	}
	h.mu.Lock() // a Release under way deleted the key itself
	released := h.released
	h.mu.Unlock()
	if !released {
		h.markLost("its key was deleted or its lease revoked while it waited")
	}
}

// watch closes Lost when the key is deleted or overwritten: the lease
// alone would miss a deleted key, as the lease lives on without it. It
// watches from just after the key was created, so it misses nothing that
// happened before it started.
func (h *handle) watch(ctx context.Context) {
	defer h.watchers.Done()
	rev := h.rev + 1
	lost := h.lost.Lost()
	for {
		wch := h.p.client.Watch(ctx, h.key, clientv3.WithRev(rev))
	events:
		for {
			select {
			case <-ctx.Done():
				return
			case <-lost:
				return
			case wr, ok := <-wch:
				if ctx.Err() != nil {
					return
				}
				if !ok {
					h.markLost("the etcd client was closed")
					return
				}
				for _, ev := range wr.Events {
					switch {
					case ev.Type == mvccpb.DELETE:
						h.markLost("its key was deleted")
						return
					case h.record != nil && h.isOurs(ev.Kv) && bytes.Equal(ev.Kv.Value, h.record):
						// our own rewrite of the owner record
					default:
						h.markLost("its key was overwritten")
						return
					}
				}
				if wr.Err() != nil || wr.Canceled {
					// Compacted past our revision, or the server dropped
					// the watch: confirm the key by reading it, then watch
					// again from there.
					next, err := h.confirm(ctx)
					if err != nil {
						return
					}
					rev = next
					break events
				}
			}
		}
	}
}

// confirm reads the key: if it is still ours it returns the revision to
// watch from, otherwise it marks the lock lost and returns an error.
func (h *handle) confirm(ctx context.Context) (int64, error) {
	for {
		var resp *clientv3.GetResponse
		err := h.p.call(ctx, func(ctx context.Context, _ bool) (err error) {
			resp, err = h.p.client.Get(ctx, h.key)
			return err
		})
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if err == nil {
			if len(resp.Kvs) == 0 || !h.isOurs(resp.Kvs[0]) {
				h.markLost("its key was deleted or overwritten")
				return 0, lock.ErrLost
			}
			return resp.Header.Revision + 1, nil
		}
		// Cannot tell now: try again until the lease's keep-alive
		// gives up, which decides loss by unreachability.
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return 0, ctx.Err()
		case <-h.sess.done:
			t.Stop()
			h.markLost("its lease expired or was revoked")
			return 0, lock.ErrLost
		}
	}
}

// markLost records why the lock was lost and closes Lost, once. It deletes
// the key if it is still bound to our lease, so that a key someone rewrote
// under it does not keep the queue blocked while the process's other locks
// keep the lease alive.
func (h *handle) markLost(why string) {
	if h.lost.MarkLost(why) {
		h.p.removeKey(h.key, h.rev, h.sess, 0)
	}
}

func (h *handle) lostError(op string) error { return h.lost.Err(op, h.path) }

// Check returns nil if etcd confirms, now, that the key is still ours: a
// linearizable read, so that a guarded update checks the lock itself just
// before it publishes, not only the last news of it.
func (h *handle) Check() error {
	h.mu.Lock()
	released := h.released
	h.mu.Unlock()
	if released {
		if err := h.lostError("check"); err != nil {
			return err
		}
		return &lock.Error{Op: "check", Path: h.path, Err: lock.ErrReleased}
	}
	if err := h.lostError("check"); err != nil {
		return err
	}
	if h.pastDeadline() {
		return h.lostError("check")
	}
	var resp *clientv3.GetResponse
	err := h.p.call(context.Background(), func(ctx context.Context, _ bool) (err error) {
		resp, err = h.p.client.Get(ctx, h.key)
		return err
	})
	if err != nil {
		return h.p.opError("check", h.path, context.Background(), err, nil)
	}
	if len(resp.Kvs) == 0 || !h.isOurs(resp.Kvs[0]) {
		h.markLost("its key was deleted or overwritten")
		return h.lostError("check")
	}
	return nil
}

// Release deletes the key if it is still ours; the lease stays for the
// process's other and later locks. It reports ErrLost (on every call) if
// the lock had been lost.
func (h *handle) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return h.relErr
	}
	h.released = true
	h.watchMu.Lock()
	h.stopped = true
	h.watchMu.Unlock()
	h.stopWatch()
	h.watchers.Wait()

	var err error
	if h.lostError("release") == nil {
		// Delete only our key: if it has another lease or another
		// create revision, the lock was not ours any more.
		var resp *clientv3.TxnResponse
		var retried bool // an earlier attempt may have deleted it
		terr := h.p.call(context.Background(), func(ctx context.Context, again bool) (err error) {
			retried = again
			resp, err = h.p.client.Txn(ctx).If(h.ours()...).Then(
				clientv3.OpDelete(h.key),
			).Else(clientv3.OpGet(h.key)).Commit()
			return err
		})
		switch {
		case terr != nil:
			err = h.p.opError("release", h.path, context.Background(), terr, nil)
			if e, ok := err.(*lock.Error); ok && e.Hint == "" {
				e.Hint = "the key is deleted as soon as etcd answers again, or when the lease expires (within " +
					h.p.ttl.String() + ") if this process ends first"
			}
			h.p.removeKey(h.key, h.rev, h.sess, 0)
		case !resp.Succeeded && !(retried && firstKV(resp.Responses[0]) == nil):
			h.markLost("its key was deleted or overwritten")
		default:
			h.p.freeSlot(h.path+"/", h.slot) // the key is gone
		}
	}
	h.lost.Seal() // from here on nothing can mark it lost
	if lerr := h.lostError("release"); lerr != nil {
		h.relErr = lerr
		return lerr
	}
	return err
}
