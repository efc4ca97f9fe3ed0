package etcd

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hold-dev/hold/lock"
)

// Inspect reports whether the lock at path is held and by whom, without
// queueing. The holder is the oldest key under the prefix; its owner
// record is the key's value (absent for a holder that is not hold, such as
// `etcdctl lock`) and the fencing token its create revision. A free lock
// reports token 0: etcd keeps no trace of past holders once their keys are
// deleted.
func (p *Protocol) Inspect(path string) (*lock.Status, error) {
	if err := checkKey(path); err != nil {
		err.(*lock.Error).Op = "inspect"
		return nil, err
	}
	var resp *clientv3.GetResponse
	err := p.call(context.Background(), func(ctx context.Context, _ bool) (err error) {
		resp, err = p.client.Get(ctx, path+"/", clientv3.WithFirstCreate()...)
		return err
	})
	if err != nil {
		return nil, p.opError("inspect", path, context.Background(), err, nil)
	}
	st, _ := p.statusOf(path, resp)
	return st, nil
}

// statusOf describes the lock at path from a Get of its prefix sorted by
// creation (WithFirstCreate): free, or held by the oldest key, which it
// also returns.
func (p *Protocol) statusOf(path string, resp *clientv3.GetResponse) (*lock.Status, *mvccpb.KeyValue) {
	st := &lock.Status{Path: path, Protocol: p.Name(), State: lock.Free}
	if len(resp.Kvs) == 0 {
		return st, nil
	}
	kv := resp.Kvs[0]
	st.State = lock.HeldExclusive
	st.Holder = holderOf(kv)
	st.Fence = uint64(kv.CreateRevision)
	return st, kv
}

// Break removes the holder of the lock at path by deleting its key, if the holder is provably gone (a dead process on this
// host) or force is set. Without force it refuses, with an error matching
// hold.ErrBusy: a holder that died on another host loses the lock by itself
// when its lease expires, within its TTL. The holder, if it still runs,
// sees its Lost channel close. Waiters are left alone.
func (p *Protocol) Break(path string, force bool) (*lock.Status, error) {
	if err := checkKey(path); err != nil {
		err.(*lock.Error).Op = "break"
		return nil, err
	}
	ctx, cancel := p.rpc(context.Background())
	defer cancel()
	resp, err := p.client.Get(ctx, path+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return nil, p.opError("break", path, context.Background(), err, nil)
	}
	st, kv := p.statusOf(path, resp)
	if kv == nil {
		return st, nil
	}
	if !force && st.Holder.Alive != lock.Dead {
		return st, &lock.Error{Op: "break", Path: path, Err: lock.ErrBusy, Holder: st.Holder,
			Hint: "the holder may still run; its lease ends the lock within its TTL if it does not, or force the break"}
	}
	// Delete exactly the key we looked at. Its lease is left alone: the
	// holder's other locks share it.
	_, err = p.client.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision),
	).Then(clientv3.OpDelete(string(kv.Key))).Commit()
	if err != nil {
		return st, p.opError("break", path, context.Background(), err, st.Holder)
	}
	return st, nil
}
