package etcd

import (
	"context"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hold-dev/hold/internal/core"
)

// handle is one held lock: a key bound to this acquisition's lease.
type handle struct {
	p      *Protocol
	path   string
	key    string
	sess   *session
	owner  core.Owner
	modRev int64 // revision of our last write to key: any other write means loss

	lost     chan struct{}
	lostOnce sync.Once
	lostMu   sync.Mutex
	lostWhy  string

	stopWatch context.CancelFunc
	watchDone chan struct{}

	mu       sync.Mutex // serializes Release
	released bool
	relErr   error
}

func newHandle(p *Protocol, path, key string, sess *session, owner core.Owner, modRev int64) *handle {
	ctx, stop := context.WithCancel(context.Background())
	h := &handle{p: p, path: path, key: key, sess: sess, owner: owner, modRev: modRev,
		lost: make(chan struct{}), stopWatch: stop, watchDone: make(chan struct{})}
	go h.watch(ctx)
	return h
}

func (h *handle) Fence() uint64         { return h.owner.Fence }
func (h *handle) Owner() *core.Owner    { o := h.owner; return &o }
func (h *handle) Lost() <-chan struct{} { return h.lost }

// watch closes Lost when the lease ends (the client could not renew it
// within its TTL, or it was revoked) or the key is deleted or overwritten.
// The session alone would miss a deleted key: the lease lives on without it.
func (h *handle) watch(ctx context.Context) {
	defer close(h.watchDone)
	rev := h.modRev + 1
	for {
		wch := h.p.client.Watch(ctx, h.key, clientv3.WithRev(rev))
	events:
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.sess.done:
				if ctx.Err() == nil {
					h.markLost("its lease expired or was revoked (no keep-alive answer within the TTL)")
				}
				return
			case wr, ok := <-wch:
				if ctx.Err() != nil {
					return
				}
				if !ok {
					h.markLost("the etcd client was closed")
					return
				}
				// The watch starts after our last write, so any event
				// on the key is someone else's.
				for _, ev := range wr.Events {
					if ev.Type == mvccpb.DELETE {
						h.markLost("its key was deleted")
					} else {
						h.markLost("its key was overwritten")
					}
					return
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
			if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != h.modRev {
				h.markLost("its key was deleted or overwritten")
				return 0, core.ErrLost
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
			h.markLost("its lease expired or was revoked (no keep-alive answer within the TTL)")
			return 0, core.ErrLost
		}
	}
}

// markLost records why the lock was lost and closes Lost, once. It stops
// renewing the lease and revokes it, so that a key someone rewrote under
// our lease does not keep the queue blocked.
func (h *handle) markLost(why string) {
	h.lostOnce.Do(func() {
		h.lostMu.Lock()
		h.lostWhy = why
		h.lostMu.Unlock()
		close(h.lost)
		h.sess.stop()
		h.p.revoke(h.sess.id, 0)
	})
}

func (h *handle) lostError(op string) error {
	select {
	case <-h.lost:
	default:
		return nil
	}
	h.lostMu.Lock()
	why := h.lostWhy
	h.lostMu.Unlock()
	return &core.Error{Op: op, Path: h.path, Err: core.ErrLost, Hint: why}
}

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
		return &core.Error{Op: "check", Path: h.path, Err: core.ErrReleased}
	}
	if err := h.lostError("check"); err != nil {
		return err
	}
	var resp *clientv3.GetResponse
	err := h.p.call(context.Background(), func(ctx context.Context, _ bool) (err error) {
		resp, err = h.p.client.Get(ctx, h.key)
		return err
	})
	if err != nil {
		return h.p.opError("check", h.path, context.Background(), err, nil)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].ModRevision != h.modRev {
		h.markLost("its key was deleted or overwritten")
		return h.lostError("check")
	}
	return nil
}

// Release deletes the key if it is still ours and revokes the lease. It
// reports ErrLost (on every call) if the lock had been lost.
func (h *handle) Release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return h.relErr
	}
	h.released = true
	h.stopWatch()
	<-h.watchDone

	var err error
	if h.lostError("release") == nil {
		// Delete only the key we wrote: if anyone else wrote it since,
		// the lock was not ours any more.
		var resp *clientv3.TxnResponse
		var gone bool // an earlier attempt may have deleted it
		terr := h.p.call(context.Background(), func(ctx context.Context, retried bool) (err error) {
			gone = retried
			resp, err = h.p.client.Txn(ctx).If(
				clientv3.Compare(clientv3.ModRevision(h.key), "=", h.modRev),
			).Then(clientv3.OpDelete(h.key)).Else(clientv3.OpGet(h.key)).Commit()
			return err
		})
		switch {
		case terr != nil:
			err = h.p.opError("release", h.path, context.Background(), terr, nil)
			if e, ok := err.(*core.Error); ok && e.Hint == "" {
				e.Hint = "the lock ends when its lease expires, within " + h.p.ttl.String()
			}
		case !resp.Succeeded && !(gone && firstKV(resp.Responses[0]) == nil):
			h.markLost("its key was deleted or overwritten")
		}
	}
	h.lostOnce.Do(func() {}) // from here on nothing can mark it lost
	h.sess.stop()
	// The key is gone (or etcd unreachable): the revoke only tidies the
	// lease up, so when etcd is not answering it goes on in the background.
	if err == nil {
		h.p.revoke(h.sess.id, h.p.reqTimeout)
	} else {
		h.p.revoke(h.sess.id, 0)
	}
	if lerr := h.lostError("release"); lerr != nil {
		h.relErr = lerr
		return lerr
	}
	return err
}
