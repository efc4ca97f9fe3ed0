// Package portable gives hold's portable lock: a directory at the lock
// path, for filesystems whose kernel locks are missing or only local (some
// NFS, FUSE and SMB mounts) and for sharing a lock with Node tools.
//
// A *Protocol implements hold.Protocol, so the hold package's Acquire,
// TryAcquire, Do, Update, Append and Inspect work on directory locks once
// it is chosen with hold.WithProtocol:
//
//	dir := portable.New(portable.StaleAfter(30 * time.Second)) // create once, reuse
//	err := hold.Do(ctx, "data/pipeline.md", func(ctx context.Context) error {
//		// ctx is cancelled if the lock is lost while this runs
//		return rewrite(ctx)
//	}, hold.WithProtocol(dir))
//
// Where kernel locks work, prefer hold's default kernel lock: it cannot
// outlive its holder, so it needs none of the staleness rules below.
//
// # How a lock works
//
// It is the lock of career-ops' dir-lock and npm's proper-lockfile, on the
// same path: "mkdir <target>.lock", an owner.json inside (pid, token,
// started_at, host, process start time, command), and a heartbeat that
// refreshes the directory's mtime every second. Token is always 0: a
// deleted directory keeps no counter.
//
// A lock outlives a holder that dies, so waiters judge it: a holder alive
// on this host is never stale, however long it holds the lock; a dead one
// (pid gone or reused) is taken over at once; a lock whose holder cannot be
// asked (no owner record, as proper-lockfile writes none; another host) is
// taken over when its heartbeat is older than StaleAfter, and never within
// Grace of its creation. A holder whose lock is removed or replaced finds
// out at its next heartbeat: Lock.Lost fires, the context hold.Do passes to
// its function is cancelled, and Release returns hold.ErrLost. The
// heartbeat is fitted to the stale time, so an idle holder is never called
// lost by its own schedule; a stale time too short for that is refused.
//
// The portable protocol shares paths with the kernel lock, hold's default:
// a lock file on which a kernel lock is held is a live lock, however old
// its record, and a lock file a kernel holder left behind is taken over
// only while holding its kernel lock, so a kernel waiter that gets the
// lock afterwards finds the file gone and starts over. It also shares them
// with Python filelock's SoftFileLock, a file that names its holder: a
// live holder's file is waited for, however old, and a dead one's is
// taken over at once (filelock, for its part, cannot wait for this
// protocol's directory: its acquire raises IsADirectoryError).
//
// # Waiting
//
// Waiting wakes on directory events where the OS has them (inotify on
// Linux) and otherwise polls with jittered backoff up to MaxPoll. The ctx
// given to Acquire is always the hard bound. Patience adds the rule of the
// Node tools: give up when one holder keeps the lock for a whole Patience
// window, but re-arm the window whenever the lock changes hands, so a
// waiter on a busy but healthy lock is not failed for bad luck; Ceiling
// (by default 10 × Patience) bounds that extended wait. The error says
// which bound expired and who holds the lock.
//
// Waiters of one machine queue in arrival order at a waiting gate (the
// fair queue "<lock path>.gate.queue", with no lock behind it), and only
// the one at the front contends for the directory; the holder keeps its
// place until it releases, so a release wakes exactly the next waiter.
// Where kernel locks do not work the gate is skipped and every waiter
// contends as the Node tools do; HOLD_DIR_GATE=0 skips it too. The
// directory remains the lock: the gate only orders the waiting.
//
// # Semaphores and shared locks
//
// A request for N slots (hold.Slots, 2 to 1024) makes the lock path a
// counting semaphore: a directory "<target>.lock" holding one lock
// directory per slot, "slot-I-of-N", each taken, judged and released by
// the rules above, beside the record of N ("semaphore") and the token
// counter ("fence.K"). At most N hold at once; a killed holder's slot is
// freed as its plain lock would be. A request with another N while a slot
// is held fails with hold.ErrSlotCount naming the N in use, as does one on
// a path that holds a plain lock; on a semaphore's path a plain request
// is one for a semaphore of one. Local waiters queue at one gate and the one
// at the front takes the first free slot, waking on any slot's release;
// waiters on other machines contend without order. Tokens rise across all
// slots. TryAcquire is busy only when every slot is held, naming every
// holder; Inspect reports each slot; Break removes stale slots, and with
// force every slot.
//
// Shared (reader) locks are refused with an error matching
// hold.ErrUnsupported: docs/portable.md says why.
//
// # Knobs
//
// Every knob has a default, which an environment variable may override
// with a finite positive value (a Go duration such as "1.5s", or a bare
// number of milliseconds): HOLD_DIR_STALE, HOLD_DIR_HEARTBEAT,
// HOLD_DIR_GRACE, HOLD_DIR_PATIENCE, HOLD_DIR_CEILING, HOLD_DIR_MAX_POLL.
// An option given to New wins over the environment. The command line
// (`hold --protocol dir`) reads the environment only.
package portable
