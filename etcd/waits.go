package etcd

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hold-dev/hold/lock"
)

var _ lock.WaitGraph = (*Protocol)(nil)

// Deadlocks between processes (lock.WaitGraph): a waiter that has waited
// DeadlockAfter says what it waits for in one key of its etcd user's own
// prefix,
//
//	hold/waits/user:<etcd user>/<lease>-<revision>
//
// (both in hex: the waiter's lease, and its waiting key's create
// revision), bound to its lease and holding the name and create revision
// of its waiting key and of the held keys the wait keeps. The waiting key
// itself, with its owner record, is most of what another waiter needs;
// the entry adds what the lock's keys cannot say: that the waiter looks
// for deadlocks, and so will give up if its wait is the youngest of a
// cycle (a waiter that does not look, DeadlockAfter(0) or another version
// of hold, has no entry, and a chain through it ends there: its wait
// would never give up), and which of its process's locks cannot be let
// go before the wait ends (a lease holds every lock of its process,
// whichever goroutine or agent client took it). The entry goes when the
// wait ends, and with the lease if the waiter crashes.
//
// Only the entries under this client's own user's prefix are read: an
// administrator who enables auth gives each user write permission on its
// own prefix only, so that another user cannot plant a wait. (Without
// auth every client is the same user, and trusted alike.) Within it a
// reader takes an entry only if etcd says it is bound to the lease its
// name gives, and its waiting key still exists with that lease and
// revision; the holders of that key's lock are read from the lock's keys,
// each named by its key and create revision, and the entry's claim to
// keep a key counts only for a key of its own lease (keys bound to a
// lease only its own process, or a user who may write all of its keys,
// can make).

// waitsPrefix is the prefix of the wait entries of this client's etcd
// user.
//
// The user is the client's user name, or under certificate auth the
// common name of its certificate (which etcd takes as the user name), as
// Dial finds it. A Protocol made by New around a client that
// authenticates by certificate only cannot tell its user: it uses the
// prefix of the empty name, which other such clients share, so its waits
// are told apart from theirs only by etcd's permissions on that prefix.
func (p *Protocol) waitsPrefix() string {
	user := p.client.Username
	if user == "" {
		user = p.certUser
	}
	return "hold/waits/user:" + user + "/"
}

// waitEntry is the value of a wait entry: the waiting key, by name and
// create revision, and the held keys the wait keeps, as holdName names
// them.
type waitEntry struct {
	Key   string   `json:"key"`
	Rev   int64    `json:"rev"`
	Keeps []string `json:"keeps,omitempty"`
	// Deadline, when not 0, is when the wait gives up by itself, in Unix
	// nanoseconds, as in this machine's wait entries (internal/waits): a
	// chain of waits that reaches it ends there.
	Deadline int64 `json:"deadline,omitempty"`
}

// holdName names a held key in a wait entry and in ServerWait: its name
// and create revision, so that a key name used again later is another.
func holdName(key string, rev int64) string { return key + "@" + strconv.FormatInt(rev, 10) }

// watching starts the request's deadlock watch, if any, for a wait that
// begins with the waiter's current key (see lock.ServerWatcher), and
// returns the context the wait is to use.
func (w *waiter) watching(ctx context.Context) context.Context {
	p, lease, e := w.p, w.sess.id, waitEntry{Key: w.key, Rev: w.rev}
	if d, ok := ctx.Deadline(); ok {
		e.Deadline = d.UnixNano()
	}
	return lock.WatchServerWait(ctx, w.req.Watch, func(ctx context.Context, keeps []lock.Handle) (string, func(), error) {
		e := e
		for _, k := range keeps {
			if h := p.own(k); h != nil {
				e.Keeps = append(e.Keeps, holdName(h.key, h.rev))
			}
		}
		return p.publishWait(ctx, lease, e)
	})
}

// own returns k's handle if it is a lock of p's, nil otherwise.
func (p *Protocol) own(k lock.Handle) *handle {
	h, _ := k.(*handle)
	if s, ok := k.(*slotHandle); ok {
		h = s.handle
	}
	if h == nil || h.p != p {
		return nil
	}
	return h
}

// publishWait writes the wait entry of the waiting key e, bound to lease,
// and returns its name and the function that deletes it.
func (p *Protocol) publishWait(ctx context.Context, lease clientv3.LeaseID, e waitEntry) (string, func(), error) {
	b, err := json.Marshal(e)
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("%s%x-%x", p.waitsPrefix(), int64(lease), e.Rev)
	rctx, cancel := p.rpc(ctx)
	_, err = p.client.Put(rctx, name, string(b), clientv3.WithLease(lease))
	cancel()
	if err != nil {
		return "", nil, err
	}
	remove := func() {
		// Deleted only while it is still this lease's; should the
		// delete fail, the entry goes with the lease, and until then
		// names a waiting key that is gone, which no reader takes.
		rctx, cancel := p.rpc(p.client.Ctx())
		defer cancel()
		p.client.Txn(rctx).If(clientv3.Compare(clientv3.LeaseValue(name), "=", lease)).
			Then(clientv3.OpDelete(name)).Commit()
	}
	return name, remove, nil
}

// page bounds the entries one read returns and the operations of one
// transaction (etcd refuses more than 128 by default): a look reads the
// entries, and then the keys of their locks, in as many pages as it
// takes, all at the revision of the first read, so that the pages make
// one picture. No count of waits turns the search off.
const page = 100

// ServerWaits lists the published waits of this client's etcd user that
// still wait, each with the keys it waits for: a round trip for each
// page of entries, and one for each page of the prefixes of their locks.
func (p *Protocol) ServerWaits(ctx context.Context) ([]lock.ServerWait, error) {
	prefix := p.waitsPrefix()
	var entryKvs []*mvccpb.KeyValue
	var rev int64
	for from := prefix; ; {
		opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithLimit(page)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		rctx, cancel := p.rpc(ctx)
		resp, err := p.client.Get(rctx, from, opts...)
		cancel()
		if err != nil {
			return nil, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		entryKvs = append(entryKvs, resp.Kvs...)
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	type entry struct {
		id     string
		lease  int64
		e      waitEntry
		prefix string
	}
	var ents []entry
	var prefixes []string
	for _, kv := range entryKvs {
		name := strings.TrimPrefix(string(kv.Key), prefix)
		lease, ok := leaseOfEntry(name)
		if !ok || kv.Lease != lease {
			continue // not an entry of hold's, or not bound to its lease
		}
		var e waitEntry
		if json.Unmarshal(kv.Value, &e) != nil {
			continue
		}
		slash := strings.LastIndexByte(e.Key, '/')
		if slash < 0 {
			continue
		}
		if l, ok := leaseOfKey(e.Key[slash+1:]); !ok || l != lease {
			continue // a waiting key must be its lease's
		}
		ents = append(ents, entry{id: string(kv.Key), lease: lease, e: e, prefix: e.Key[:slash+1]})
		if !slices.Contains(prefixes, e.Key[:slash+1]) {
			prefixes = append(prefixes, e.Key[:slash+1])
		}
	}
	if len(ents) < 2 {
		return nil, nil // no cycle has fewer than two waits
	}
	keys := map[string][]*mvccpb.KeyValue{}
	for len(prefixes) > 0 {
		batch := prefixes[:min(page, len(prefixes))]
		prefixes = prefixes[len(batch):]
		ops := make([]clientv3.Op, len(batch))
		for i, pr := range batch {
			r := allRange(pr)
			ops[i] = clientv3.OpGet(r.start, append(r.oldest(0), clientv3.WithRev(rev))...)
		}
		rctx, cancel := p.rpc(ctx)
		tresp, err := p.client.Txn(rctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return nil, err
		}
		for i, pr := range batch {
			keys[pr] = tresp.Responses[i].GetResponseRange().GetKvs()
		}
	}
	var out []lock.ServerWait
	for _, en := range ents {
		kvs := keys[en.prefix]
		held := heldKeys(en.prefix, kvs)
		var mine *mvccpb.KeyValue
		for _, kv := range kvs {
			if string(kv.Key) == en.e.Key && kv.CreateRevision == en.e.Rev && kv.Lease == en.lease {
				mine = kv
			}
		}
		if mine == nil || held[mine] {
			continue // the wait ended, or is over
		}
		ahead := aheadRange(en.prefix, string(mine.Key))
		var blockers []string
		if kindOf(string(mine.Key)).shared {
			// A reader waits for the newest exclusive key older than
			// its own, holding or waiting: readers queue behind a
			// waiting writer, and get the lock only once it has had
			// it and let go. That writer, when it waits, is the wait
			// its own key names (its Place).
			var newest *mvccpb.KeyValue
			for _, kv := range kvs {
				if kv.CreateRevision < mine.CreateRevision && ahead.has(string(kv.Key)) {
					newest = kv
				}
			}
			if newest != nil {
				blockers = append(blockers, blockerName(newest))
			}
		} else {
			for _, kv := range kvs {
				if held[kv] && kv.CreateRevision < mine.CreateRevision && ahead.has(string(kv.Key)) {
					blockers = append(blockers, blockerName(kv))
				}
			}
		}
		var keeps []string
		for _, k := range en.e.Keeps {
			key, _, _ := strings.Cut(k, "@")
			if l, ok := leaseOfKey(key[strings.LastIndexByte(key, '/')+1:]); ok && l == en.lease {
				keeps = append(keeps, k)
			}
		}
		sw := lock.ServerWait{ID: en.id, Path: strings.TrimSuffix(en.prefix, "/"), Shared: kindOf(string(mine.Key)).shared, Order: mine.CreateRevision,
			Blockers: blockers, Holds: keeps, Place: holdName(string(mine.Key), mine.CreateRevision)}
		if en.e.Deadline != 0 {
			sw.Deadline = time.Unix(0, en.e.Deadline)
		}
		if o, ok := lock.DecodeOwner(mine.Value); ok {
			sw.Waiter = *o
		}
		out = append(out, sw)
	}
	return out, nil
}

// heldKeys tells which keys of a lock's prefix hold, by the waiters' own
// rules (kvs in create-revision order, as the whole prefix is read): an
// exclusive key when no key is older, a reader when no exclusive key is,
// a semaphore's key when fewer than its N keys of the semaphore are.
func heldKeys(prefix string, kvs []*mvccpb.KeyValue) map[*mvccpb.KeyValue]bool {
	held := map[*mvccpb.KeyValue]bool{}
	exclusive := false
	perN := map[int]int{}
	for i, kv := range kvs {
		k := kindOf(string(kv.Key))
		switch {
		case k.shared:
			held[kv] = !exclusive
		case k.slots > 0:
			held[kv] = !exclusive && perN[k.slots] < k.slots
			perN[k.slots]++
		default:
			held[kv] = i == 0
			exclusive = true
		}
	}
	return held
}

// aheadRange is the range of keys the waiting key waits for (see
// acquireAs).
func aheadRange(prefix, key string) keyRange {
	k := kindOf(key)
	switch {
	case k.shared:
		return readerRange(prefix)
	case k.slots > 0:
		return slotsRange(prefix, k.slots)
	}
	return allRange(prefix)
}

// has reports whether key is in r.
func (r keyRange) has(key string) bool { return key >= r.start && key < r.end }

// blockerName names the held key kv as holdName does, when it is bound
// to the lease its name gives; another (a key of another tool's) by a
// name no wait keeps.
func blockerName(kv *mvccpb.KeyValue) string {
	key := string(kv.Key)
	if l, ok := leaseOfKey(key[strings.LastIndexByte(key, '/')+1:]); !ok || l != kv.Lease {
		return "foreign " + key
	}
	return holdName(key, kv.CreateRevision)
}

// leaseOfEntry reads the lease from a wait entry's name,
// "<lease>-<revision>".
func leaseOfEntry(name string) (int64, bool) {
	l, rev, ok := strings.Cut(name, "-")
	if !ok || strings.Contains(rev, "/") {
		return 0, false
	}
	if _, err := strconv.ParseUint(rev, 16, 63); err != nil {
		return 0, false
	}
	n, err := strconv.ParseUint(l, 16, 63)
	return int64(n), err == nil && n != 0
}

// leaseOfKey reads the lease from the name of a key under a lock's prefix
// (see keys.go).
func leaseOfKey(name string) (int64, bool) {
	name = strings.TrimPrefix(name, readerMark)
	if rest, ok := strings.CutPrefix(name, slotsMark); ok {
		_, name, ok = strings.Cut(rest, "-")
		if !ok {
			return 0, false
		}
	}
	l, _, ok := strings.Cut(name, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(l, 16, 63)
	return int64(n), err == nil && n != 0
}
