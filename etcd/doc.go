// Package etcd gives hold's locks on an etcd cluster, for processes that
// share a resource across machines.
//
// A *Protocol implements hold.Protocol, so the hold package's Acquire,
// TryAcquire, Do, Update and Inspect work on etcd once it is chosen with
// hold.WithProtocol. The lock path is the etcd key prefix of the lock:
//
//	p, err := etcd.Dial(ctx, etcd.Config{Endpoints: []string{"10.0.0.5:2379"}})
//	if err != nil { ... }
//	defer p.Close()
//	err = hold.Do(ctx, "", func(ctx context.Context) error {
//		// ctx is cancelled if the lock is lost (lease expired, key deleted)
//		return deploy(ctx)
//	}, hold.WithProtocol(p), hold.LockFile("locks/deploy"))
//
// # How a lock works
//
// The locks taken through one Protocol share one lease (TTL, default 15 s),
// kept alive by one stream while the Protocol lives, as the locks of one
// concurrency.Session do. Every acquisition enqueues a key
// "<prefix>/<lease id in hex>-<slot>", bound to the lease, whose value is
// the owner record (pid, host, command, start time, acquisition id); the
// slot keeps two locks of one process on one prefix apart. The key with the
// lowest create revision holds the lock; the others wait in create-revision order, each on
// its immediate predecessor only, so a release wakes exactly one waiter.
// This is the layout of etcd's own concurrency.Mutex (and `etcdctl lock`),
// so the two exclude each other on the same prefix.
//
// The fencing token is the holder key's create revision: etcd's revision
// counter only grows, so every acquisition of every lock gets a larger token
// than any before it, across clients, restarts and leader changes.
//
// A holder's Lost channel closes, and Check fails, early enough for the
// holder to stop before anyone else can be granted the lock: at the send
// time of the last acknowledged keep-alive plus the TTL (the earliest
// moment etcd may expire the lease), less the request's StopWithin and a
// safety margin, unless a newer keep-alive was acknowledged. It also closes
// when etcd says the lease is gone (revoked: every lock on it is then
// lost) or when the lock's own key is deleted or overwritten (a watch on
// the key, started by the first call to Lost; Check and Release ask etcd
// directly). A failed or abandoned acquisition deletes its waiting key, so
// it does not hold up the queue. A waiter rides out an outage until its
// context ends (see WithOutageNotice), queueing again if its lease ended.
//
// # Speed
//
// concurrency.Mutex waits for its predecessor with a watch that starts at a
// past revision; etcd serves such a watch from its background resync loop,
// which runs every 100 ms, so a hand-off can wait up to that long. Here a
// waiter watches from the current revision, which etcd serves as events
// happen, and then re-reads the queue in case its predecessor left before
// the watch started. Waiting writes nothing: when the predecessor was the
// holder, its deletion hands the lock over without a round trip, and the
// owner record gets its acquisition time in the background afterwards.
//
// # What a lease-based lock cannot promise
//
// A holder that is paused (a long GC pause, swap, SIGSTOP, a VM suspended
// or migrated) runs no timer, so it may lose the lock while it still
// believes it holds it: its lease expires on the server before its own
// Lost signal can fire. Mutual exclusion of the *work* then rests on the
// fencing token: pass Lock.Token to the resource and have it refuse a
// token smaller than the largest it has seen.
//
// Lock paths must not nest: the waiters of "locks/a" are the keys under
// "locks/a/", so a lock named "locks/a/b" would queue among them.
//
// # Shared locks and semaphores
//
// A shared (reader) hold puts "<prefix>/~r-<lease>-<slot>" instead, and a
// place in a semaphore of N slots (Protocol.AcquireSlot)
// "<prefix>/s<N>-<lease>-<slot>": the names make each kind one range of
// keys (see keys.go). A reader waits for the newest earlier exclusive key,
// so readers hold together and a writer waits for every earlier key, as
// etcd's recipes' read-write lock does; a reader has no fencing token of
// its own, and holds beside a semaphore's places, as on kernel locks. A semaphore's N oldest keys hold its places;
// its first waiter watches for the deletion of a key in front of it, the
// others only the key just in front, which a holder rewrites when it
// claims its place (the lowest free one, written into its record), so a
// release wakes no herd. A semaphore request that finds exclusive keys or
// another N's fails with lock.ErrSlotCount naming the N in use; a
// plain lock waits for a semaphore's holders as for any earlier key.
// A place's token is the revision of its claim, so tokens rise across all
// places in the order they are granted.
package etcd
