package etcd

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hold-dev/hold/lock"
)

// Inspect reports whether the lock at path is held and by whom, without
// queueing, from its keys in create-revision order (see keys.go): the
// oldest key holds an exclusive lock; readers hold together until the
// first key that is not a reader's; the N oldest keys of a semaphore hold
// its places. A holder's owner record is its key's value (absent for a
// holder that is not hold, such as `etcdctl lock`) and its fencing token
// the key's create revision. A free lock reports token 0: etcd keeps no
// trace of past holders once their keys are deleted.
func (p *Protocol) Inspect(path string) (*lock.Status, error) {
	if err := checkKey(path); err != nil {
		err.(*lock.Error).Op = "inspect"
		return nil, err
	}
	var resp *clientv3.GetResponse
	err := p.call(context.Background(), func(ctx context.Context, _ bool) (err error) {
		resp, err = p.client.Get(ctx, path+"/", allRange(path+"/").oldest(0)...)
		return err
	})
	if err != nil {
		return nil, p.opError("inspect", path, context.Background(), err, nil)
	}
	st, _, _ := p.statusOf(path, resp.Kvs)
	return st, nil
}

// statusOf describes the lock at path from its keys, oldest first: free,
// or held; it also returns the oldest key and how many keys wait.
//
// The oldest key holds an exclusive lock. Otherwise the readers older than
// the first exclusive key hold together, and so do the N oldest keys of a
// semaphore (every one older than any exclusive key: a semaphore request
// is refused while one exists). A semaphore's holder shows in the place
// its record names, with the token of its claim (the key's last write),
// or, while it is claiming one, in the first place free.
func (p *Protocol) statusOf(path string, kvs []*mvccpb.KeyValue) (*lock.Status, *mvccpb.KeyValue, int) {
	st := &lock.Status{Path: path, Protocol: p.Name(), State: lock.Free}
	if len(kvs) == 0 {
		return st, nil, 0
	}
	first := kvs[0]
	if k := kindOf(string(first.Key)); !k.shared && k.slots == 0 {
		st.State = lock.HeldExclusive
		st.Holder = holderOf(first)
		st.Fence = uint64(first.CreateRevision)
		return st, first, len(kvs) - 1
	}
	st.State = lock.HeldShared
	held := 0
	var unplaced []*lock.Holder
	exclusiveSeen := false
	for _, kv := range kvs {
		k := kindOf(string(kv.Key))
		switch {
		case k.shared && !exclusiveSeen:
			held++
			st.Holders = append(st.Holders, holderOf(kv))
		case k.slots > 0 && (st.Slots == 0 || k.slots == st.Slots):
			if st.Slots == 0 {
				st.Slots = k.slots
				st.SlotHolders = make([]*lock.Holder, k.slots)
			}
			if held-len(st.Holders) == st.Slots {
				continue // a waiter
			}
			held++
			h := holderOf(kv)
			if n, ok := placeOf(kv); ok && n >= 0 && n < k.slots && st.SlotHolders[n] == nil {
				// A placed holder's token is its claim's revision.
				if h.Owner != nil {
					h.Owner.Fence = uint64(kv.ModRevision)
				}
				st.Fence = max(st.Fence, uint64(kv.ModRevision))
				st.SlotHolders[n] = h
			} else {
				unplaced = append(unplaced, h)
			}
		case !k.shared && k.slots == 0:
			exclusiveSeen = true
		}
	}
	for i := 0; i < st.Slots && len(unplaced) > 0; i++ {
		if st.SlotHolders[i] == nil {
			st.SlotHolders[i], unplaced = unplaced[0], unplaced[1:]
		}
	}
	if st.Slots > 0 {
		// A semaphore's status: Holder is its first holder, Holders
		// stays for readers beside it.
		for _, h := range st.SlotHolders {
			if h != nil {
				st.Holder = h
				break
			}
		}
	} else {
		st.Holder = st.Holders[0]
	}
	if st.Holder == nil && len(st.Holders) > 0 {
		st.Holder = st.Holders[0]
	}
	return st, first, len(kvs) - held
}

// Break removes the holder of the lock at path by deleting its key (for a
// lock held shared or a semaphore, the oldest holder's), if the holder is
// provably gone (a dead process on this host) or force is set. Without force it refuses, with an error matching
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
	resp, err := p.client.Get(ctx, path+"/", allRange(path+"/").oldest(0)...)
	if err != nil {
		return nil, p.opError("break", path, context.Background(), err, nil)
	}
	st, kv, _ := p.statusOf(path, resp.Kvs)
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
