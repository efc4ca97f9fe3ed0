// Package hold lets processes take turns on a shared resource: a
// read-modify-write of a shared file that never loses an update, a holder
// that crashes without wedging anyone, and a lock nobody but its holder can
// delete.
//
// The default protocol is the kernel's own file lock (flock(2) on unix,
// LockFileEx on Windows) on the lock path, by default "<target>.lock"; a
// target whose name ends in ".lock" (a flock(1) lock file, a yarn.lock) is
// locked itself too, as flock(1) takes it, while hold's record stays in
// its "<target>.lock". It
// interoperates with flock(1), Python's filelock, gofrs/flock and Go's
// lockedfile on the same path, and with the hold command and its Node and
// Python packages. The kernel frees the lock of a process that dies, so
// there is nothing to go stale. The lock file's directory must exist:
// hold never makes a missing one unless asked ([MakeDirs]), and neither
// do the hold command, Node and Python; a missing directory is most often a
// typo or a share that is not mounted, where a lock would exclude nobody.
//
//	err := hold.Do(ctx, "data/tracker.md", func(ctx context.Context) error {
//		// only one process at a time runs this
//		return appendRow("data/tracker.md")
//	})
//
// Every error from this package that concerns a lock is an *Error: it names
// the operation, the lock path and the cause, matches the sentinel errors
// (ErrBusy, ErrTimeout, ...) with errors.Is, and, when the lock was held by
// someone else, describes that holder: its pid, command, host, how long it
// has held the lock, and whether it is still alive.
//
// # Taking a lock
//
// [Do] runs a function under the lock and releases it whatever the
// function does. [Acquire] waits for as long as its context allows and
// returns a [Lock] to release; a deadline ends the wait with an error that
// matches [ErrTimeout] (and context.DeadlineExceeded). [TryAcquire] never
// waits: a busy lock is [ErrBusy] at once, naming the holder.
//
//	l, err := hold.Acquire(ctx, "data/tracker.md")
//	if err != nil {
//		var e *hold.Error
//		if errors.As(err, &e) && e.Holder != nil {
//			log.Printf("held by %s", e.Holder) // pid, command, host, how long, alive
//		}
//		return err
//	}
//	defer l.Release()
//
// The lock path is derived from the target as the hold command derives it:
// one resource has one lock however it is spelled ("data", "data/" and "."
// inside data all lock data.lock). [LockFile] names the lock file itself,
// as flock(1) takes it. [Named] is a lock that guards something other than
// one file (a deploy, a backup): one name is one lock for a user on a
// machine, in every environment (cron, a login shell, ssh, a service);
// [NamedDir] says where such locks live.
//
//	deploy, err := hold.TryAcquire("", hold.Named("deploy"))
//	if errors.Is(err, hold.ErrBusy) {
//		return fmt.Errorf("someone else is deploying: %w", err) // err names them
//	}
//
// [Shared] takes a reader lock. [Inspect] reports a lock's state without
// taking it, as `hold status` does; [Break] removes a portable lock whose
// holder is provably gone.
//
// A wait that could never end fails at once with [ErrDeadlock], naming the
// holder: the lock is kept only by ancestors that run this process and
// wait for it (hold run, hold update, flock(1), and the shells between),
// as the kernel says on Linux; a lock that anything else keeps too (a
// background process sharing the descriptor) is waited for, and the check
// is made again while waiting (docs/cli.md tells the rule). A process may
// wait for a lock that another of its goroutines holds, so Acquire cannot
// call that a deadlock by itself; [FailIfHeldHere] (nothing in this
// process can release a lock while this call waits) and [FailIfHeldBy]
// (these locks are the caller's, and it will not release them while it
// waits) say when it is one. Every such check compares the lock itself
// (its file's device and inode, or its canonical path), never the
// spelling of its path.
//
// A held lock can be lost: its lock file removed or replaced, a portable
// lock broken, a lease expired. [Lock.Lost] is closed once the loss is
// found, and [Lock.Check] and [Lock.Release] return an error matching
// [ErrLost].
//
// # Who holds it
//
// A holder publishes an owner record: pid, host, command line, start time,
// fencing token, and the fields the caller adds with [Field]. Waiters see
// it in their errors, `hold status` and [Inspect] show it, and
// [Lock.Owner] returns the caller's own. The command line is recorded as
// ps shows it, with values that look like secrets (passwords, tokens,
// keys, Authorization headers) masked; [OmitCommand] leaves it out. On
// release the record is overwritten with only what the next holder needs,
// the last token, so nothing of a past holder stays on disk. hold writes
// its record only into a lock file that is provably its own, empty or
// holding a record of hold's. Anything else (data, another tool's
// Cargo.lock) is locked as flock(1) locks it, without a record or token
// ([Lock.TokenError] says why), when it was named with [LockFile] or as a
// target ending in ".lock", and refused with [ErrForeign] when it was
// reached only as a target's default lock path.
//
// # Guarded updates
//
// [Update] is a read-modify-write of a file under its lock: it reads the
// file, calls fn with the old content and replaces the file atomically
// (temporary file, fsync, rename, fsync of the directory) with what fn
// returns. Nothing is written if fn fails, returns the same bytes, or
// returns nothing ([ErrEmpty], unless [AllowEmpty]). [Append] adds one
// record in one O_APPEND write and an fsync, under the same lock, so
// appenders never interleave and a failed append leaves no torn record.
//
//	err := hold.Update(ctx, "hooks.json", func(old []byte) ([]byte, error) {
//		return mergeHook(old, "lint")
//	})
//	err = hold.Append(ctx, "events.log", []byte("deployed v42\n"))
//
// Both take the lock options ([Named], [LockFile], ...) and wait as long as
// ctx allows; once the lock is held, the change runs to its end. Update
// keeps everything the old file is (owner, group, mode, ACLs and other
// extended attributes) or refuses with the file untouched: a file with
// other hard links ([ErrHardLinked]; [AllowSplit] accepts it), another
// user's file when the caller is not root ([ErrOwnerNotKept];
// [AllowOwnerChange]), an attribute it may not set ([ErrXattrNotKept]), a
// symlink someone else planted in a sticky directory
// ([ErrProtectedSymlink]). [MustExist] makes a missing file an error.
//
// On Windows the replacement is atomic too. Where the system offers POSIX
// rename semantics (Windows 10 1607 and later, NTFS) a reader that has the
// old file open keeps reading the old content, as on Unix; elsewhere
// Update waits, up to 5 seconds, until no one has the file open, since
// Windows cannot replace an open file there. A reader that opens the file
// in the instant it is replaced may be refused for that instant (a sharing
// violation, which Windows programs retry); it never finds the file
// missing, empty or partial. The repository's docs/update.md has the
// details: crashes, leftovers, large files, cost.
//
// # Protocols
//
// [WithProtocol] chooses another lock implementation than the kernel's:
//
//   - portable.New, from github.com/hold-dev/hold/portable: a directory
//     lock (mkdir, an owner record, a heartbeat) for filesystems whose
//     kernel locks other machines do not see (some NFS, SMB and FUSE
//     mounts), and to share a lock with Node's proper-lockfile;
//     [StaleAfter] sets one lock's stale time;
//   - etcd.Dial, from github.com/hold-dev/hold/etcd: a key per waiter
//     under a lease, first come first served, for processes on several
//     machines;
//   - postgres.Dial, from github.com/hold-dev/hold/postgres: a session
//     advisory lock per holder, for processes that share a PostgreSQL
//     database.
//
// Each package configures its protocol with options of its own
// (portable.StaleAfter, etcd.WithTTL, postgres.WithMaxIdle). This package
// imports neither etcd nor postgres, so a program that uses only local
// locks links neither gRPC nor a PostgreSQL driver.
//
// A protocol of your own implements [Protocol] and [Handle] from
// github.com/hold-dev/hold/lock, the contract (this package aliases its
// types), and may add the optional capabilities named there (Breaker,
// Namer, Lister, Describer, Closer, TokenReasoner, Filer, ...);
// lock.LostState keeps a handle's lost-lock state.
// github.com/hold-dev/hold/holdtest checks an implementation against the
// contract; the repository's examples/tcplock is one written outside hold.
//
// # Machines that share files
//
// A kernel lock is only as wide as the filesystem makes it: on a network
// or FUSE filesystem whose client keeps kernel locks to itself, two
// machines both get "the" lock. [Lock.MachineLocal] says so for a lock
// held (an error matching [ErrMachineLocal], nil where there is nothing to
// say), and [RefuseMachineLocal] makes Acquire fail with it instead; the
// portable protocol works there. The doctor package's Check (package
// github.com/hold-dev/hold/doctor) finds out by experiment what works
// in a directory. The repository's docs/sharing.md has the table of
// filesystems.
//
// # Fencing tokens
//
// [Lock.Token] is a number that grows with every exclusive acquisition of
// a lock path, across processes and restarts (the hold command passes it
// to its command as HOLD_TOKEN). A holder that is paused (GC, swap,
// SIGSTOP, a network partition) for longer than a lease lasts loses its
// lease while it still believes it holds the lock, and notices only when
// it runs again; so send the token with every write and have the resource
// refuse one smaller than the largest it has accepted:
//
//	_, err = db.Exec(`UPDATE jobs SET state = $1, fence = $2 WHERE id = $3 AND fence <= $2`,
//		state, l.Token(), id)
//
// Kernel locks keep the counter in the lock file, etcd uses the holder
// key's create revision, and PostgreSQL a table; the portable protocol
// gives none, since its lock is deleted on release ([Lock.TokenError]
// says why a token is 0).
//
// # Fair waiting
//
// A kernel lock is not fair: a process that loops on it usually takes it
// straight back, and an unlucky waiter can be passed over for a long time.
// [Fair] queues fair waiters in arrival order: each waits in the kernel on
// its predecessor's ticket; a crashed or cancelled waiter leaves the queue
// at once, and one stopped with Ctrl-Z is named to those behind it and
// passed over once the lock has stayed free for 2 seconds. Fair and plain waiters still exclude each
// other; only fair waiters are ordered. Windows refuses Fair with
// [ErrUnsupported]. The repository's docs/fair.md has the details.
//
// # What a lock costs
//
// An uncontended [Acquire] and [Lock.Release] of a kernel lock is four
// system calls on Linux, as many as an open-lock-close cycle needs: open,
// statx, flock, close. The owner record and the fencing token are written
// only when they are used (when the holder asks for [Lock.Token] or
// [Lock.Owner]) or once a hold has lasted 10-60 ms; until then anyone who
// asks who holds the lock is told the holder's pid by the kernel. Where
// the kernel cannot name a lock's holder (macOS, the BSDs, Windows) the
// record is written at once. In the repository's bench suite an
// uncontended Acquire and Release took 0.92 times what gofrs/flock takes
// with a new Flock each time, in the same run (docs/bench.md has the
// figures and how to reproduce them).
package hold
