package etcd

import (
	"context"
	"slices"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hold-dev/hold/lock"
)

// List reports every lock under the key prefix, in key order: each is
// called with the lock's state, as Inspect reports it, and the number of
// its waiters. A lock is the parent of the keys its holder and waiters put
// ("prefix/a/b/<lease>" is a key of the lock "prefix/a/b"), so one range
// read, sorted by creation, describes them all: the oldest key of a lock
// holds it and the others wait (readers hold together, and a semaphore's
// N oldest keys; see Inspect). Locks nobody holds or waits for leave no
// key behind and are not listed.
func (p *Protocol) List(ctx context.Context, prefix string, each func(st *lock.Status, waiters int)) error {
	if err := checkKey(prefix); err != nil {
		err.(*lock.Error).Op = "list"
		return err
	}
	var resp *clientv3.GetResponse
	err := p.call(ctx, func(ctx context.Context, _ bool) (err error) {
		resp, err = p.client.Get(ctx, prefix+"/", clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
		return err
	})
	if err != nil {
		return p.opError("list", prefix, ctx, err, nil)
	}
	keys := map[string][]*mvccpb.KeyValue{}
	for _, kv := range resp.Kvs {
		k := string(kv.Key)
		lockPath := k[:strings.LastIndexByte(k, '/')] // every key has prefix+"/"
		keys[lockPath] = append(keys[lockPath], kv)
	}
	locks := make([]string, 0, len(keys))
	for lockPath := range keys {
		locks = append(locks, lockPath)
	}
	slices.Sort(locks)
	for _, lockPath := range locks {
		st, _, waiters := p.statusOf(lockPath, keys[lockPath])
		each(st, waiters)
	}
	return nil
}
