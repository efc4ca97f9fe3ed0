// Types of @hold-dev/hold, for require() (index.d.ts re-exports them for
// import). The agent protocol under it is described in the repository's
// docs/agent.md.

/** Who holds a lock, from its owner record. */
export interface Holder {
  /** The holder's process id on `host` (for this package's locks: its agent's). */
  pid: number;
  host?: string;
  /**
   * Whether the holder's process still runs: true or false, or null where
   * hold cannot tell (another host, another pid namespace).
   */
  alive: boolean | null;
  /** The holder's command line. */
  command?: string[];
  /** When the lock was acquired (RFC 3339). */
  started_at?: string;
  /** How long the lock has been held, in seconds. */
  held_seconds?: number;
  shared?: boolean;
  fields?: Record<string, string>;
}

/** The record a holder publishes (`hold status` shows it). */
export interface Owner {
  pid: number;
  host?: string;
  /** Random id of this one acquisition (not the fencing token: see `fence`). */
  token?: string;
  started_at: string;
  proc_start?: number;
  /** The holder's pid namespace (Linux: the inode of /proc/self/ns/pid); a pid of another namespace means nothing here. */
  pid_ns?: number;
  /** The holder's machine boot (Linux: /proc/sys/kernel/random/boot_id); a pid of another boot means nothing now. */
  boot_id?: string;
  command?: string[];
  /** The fencing token of this acquisition (zero for shared holds). */
  fence?: number;
  shared?: boolean;
  released: boolean;
  protocol?: string;
  fields?: Record<string, string>;
}

/** The codes of HoldError; file operations add the system's ('ENOENT', 'EACCES', ...). */
export type HoldErrorCode =
  | 'EBUSY'
  | 'ETIMEDOUT'
  | 'EABORT'
  | 'ELOST'
  | 'EINVAL'
  | 'EAGENT'
  | 'EDEADLK'
  | 'ENOLOCK'
  | 'ENOENT'
  | 'EACCES'
  | 'ENOTREG'
  | 'EFOREIGN'
  | 'EISDIR'
  | 'ENOSPC'
  | 'EROFS'
  | 'ENOTSUP'
  | 'ENOEXEC'
  | 'EIO'
  | (string & {});

/** The error of every failed operation. */
export class HoldError extends Error {
  name: 'HoldError';
  /** What happened: 'EBUSY', 'ETIMEDOUT', 'EABORT', 'ELOST', 'EINVAL', 'EAGENT', ... */
  code: HoldErrorCode;
  /** Who holds the lock, for contention errors (busy, timed out, aborted). */
  holder?: Holder;
  /** What to do about it, when hold knows. */
  hint?: string;
}

/** How to take a lock. */
export interface LockOptions {
  /** Seconds to wait at most; omitted: as long as it takes; 0: do not wait (EBUSY). */
  wait?: number;
  /** Ends the wait with 'EABORT' when it aborts. */
  signal?: AbortSignal;
  /** A shared (reader) lock: shared holders go together, an exclusive one waits for all. */
  shared?: boolean;
  /** Wait in line: first come, first served. */
  fair?: boolean;
  /** The lock protocol: 'flock' (kernel locks, the default) or 'dir' (portable, for network filesystems). */
  protocol?: string;
  /** Lock exactly this file instead of `<target>.lock`. */
  lockFile?: string;
  /** A named lock in your private lock directory (the target may then be omitted). */
  name?: string;
  /** Extra fields for the owner record, shown by `hold status`. */
  fields?: Record<string, string>;
  /** Connection settings of network backends, by flag name: 'ttl', 'etcd-ca', 'etcd-user', ... */
  settings?: Record<string, string>;
  /**
   * The portable protocol's stale time for this lock, in seconds: a holder
   * it cannot ask (no owner record, another host) is taken over once its
   * heartbeat is older; the lock taken is refreshed often enough for it.
   * Default: HOLD_DIR_STALE in the agent's environment, else 10.
   */
  stale?: number;
  /**
   * The portable protocol's heartbeat for this lock, in seconds: how
   * often the holder refreshes its time stamp (proper-lockfile's update).
   * At most half the stale time. Default: HOLD_DIR_HEARTBEAT in the
   * agent's environment, else 1.
   */
  heartbeat?: number;
  /**
   * The portable protocol: the lock is lost when a heartbeat finds its
   * time stamp changed by someone else, as proper-lockfile's holders
   * judge it. Default false.
   */
  lostIfTouched?: boolean;
  /**
   * Make the lock file's missing parent directories (mode 0777 under the
   * umask). Without it a missing directory is an 'ENOENT' error, as it is
   * for the hold command and the Go library (docs/cli.md, "Missing
   * directories").
   */
  makeDirs?: boolean;
  /**
   * Take one of this many slots of a counting semaphore instead of the
   * lock itself: at most that many holders at once, as `hold run --slots`
   * (docs/cli.md, "Semaphores"). The lock's `slot` says which.
   */
  slots?: number;
  /**
   * Seconds a wait lasts before it looks for a deadlock between processes
   * (default 1; 0: never): when this wait closes a cycle of waits (this
   * process waits for a lock whose holder waits, in the end, for one this
   * call keeps) and began last, it rejects with 'EDEADLK' naming every
   * process and lock. Linux, kernel, fair and portable locks.
   */
  deadlockAfter?: number;
  /**
   * The locks this call keeps until its wait ends: an async function
   * that holds `a` and waits for `b` says `{ heldBy: [a] }`. A wait for a
   * lock one of them holds rejects at once with 'EDEADLK', and the
   * deadlock search counts them as kept, which it does for no lock of an
   * async wait otherwise (another task may release it meanwhile). A
   * synchronous wait (lockSync, ...) keeps every lock of the process.
   */
  heldBy?: Lock[];
}

/** How to update or append to a file. */
export interface FileOptions extends Omit<LockOptions, 'shared' | 'slots'> {
  /** Fail with 'ENOENT' if the file does not exist (instead of starting empty, or creating it). */
  mustExist?: boolean;
}

export interface UpdateOptions extends FileOptions {
  /** What fn gets: a string (the default, 'utf8') or a Buffer ('buffer'). */
  encoding?: 'utf8' | 'buffer';
  /** Replace a file that has other hard links, which keep the old content (otherwise 'EACCES'). */
  allowSplit?: boolean;
  /**
   * Replace a file whose owner or group cannot be kept; it then belongs to
   * the agent's user, and a 'HoldWarning' process warning says so
   * (otherwise 'EACCES').
   */
  allowOwnerChange?: boolean;
  /**
   * Let fn's empty result empty the file (otherwise it is refused with
   * 'EIO' and the file left as it was).
   */
  allowEmpty?: boolean;
}

/** Where a lock is, for status. */
export interface StatusOptions {
  protocol?: string;
  lockFile?: string;
  name?: string;
  settings?: Record<string, string>;
  /**
   * The stale time (seconds) to judge a portable lock by: a holder that
   * cannot be asked whether it lives is reported 'stale' once its
   * heartbeat is older, as lock() with this stale time would take it over.
   */
  stale?: number;
}

/** A held lock. */
export interface Lock {
  /**
   * The fencing token: grows with every exclusive acquisition of this lock
   * path. Read it while the lock is held: a kernel lock's record and token
   * are written when first read (or once held 10-60 ms); one released
   * before either has token 0 and owner null.
   */
  readonly token: number;
  /** The slot held of a semaphore (`slots`), 0 to n-1; 0 for a plain lock. */
  readonly slot: number;
  /** The lock path (for etcd, the key). */
  readonly path: string;
  /** The protocol holding the lock. */
  readonly protocol: string;
  /** The owner record published for this lock (null once released if it was never read or written). */
  readonly owner: Owner;
  /** Aborts, with a HoldError 'ELOST' as its reason, if the lock is lost. */
  readonly signal: AbortSignal;
  /**
   * Gives the lock up; idempotent. Rejects with 'ELOST' if the lock was
   * lost. A kernel lock's release is written without waiting for its
   * reply (Linux): should it find the lock lost, the package's next call
   * throws that 'ELOST' (one that comes as the process exits is printed).
   */
  release(): Promise<void>;
  /** Resolves while the lock is held; rejects with 'ELOST' otherwise. */
  check(): Promise<void>;
  /** release(), synchronously: throws 'ELOST' if the lock was lost. */
  releaseSync(): void;
  /** check(), synchronously: returns while the lock is held, throws 'ELOST' otherwise. */
  checkSync(): void;
}

/** The state of a lock, as `hold status --json` reports it. */
export interface Status {
  target?: string;
  lock_file: string;
  protocol: string;
  state: 'free' | 'held exclusive' | 'held shared' | 'stale';
  held: boolean;
  /** The last fencing token handed out on this lock. */
  token: number;
  holder?: Holder;
  kernel_pids?: number[];
  openers?: { pid: number; command?: string }[];
  note?: string;
}

/** Takes the lock on target (its lock file is `<target>.lock`), waiting as opts.wait says. */
export function lock(target: string | undefined, opts?: LockOptions): Promise<Lock>;

/** Takes the lock if it is free; rejects with 'EBUSY' naming the holder otherwise. */
export function tryLock(target: string | undefined, opts?: Omit<LockOptions, 'wait' | 'signal'>): Promise<Lock>;

/** Runs fn under the lock and releases it whatever fn does; resolves with fn's result. */
export function withLock<T>(target: string | undefined, fn: (lock: Lock) => T | Promise<T>, opts?: LockOptions): Promise<T>;

/**
 * Replaces the file's content with fn(old content), atomically and under
 * its lock. Nothing is written if fn throws or returns the old content.
 * Resolves with whether the file was written; what the agent warns about
 * after the file was replaced is emitted as a 'HoldWarning' process
 * warning.
 */
export function update(file: string, fn: (old: string) => string | Uint8Array | Promise<string | Uint8Array>, opts?: UpdateOptions & { encoding?: 'utf8' }): Promise<boolean>;
export function update(file: string, fn: (old: Buffer) => string | Uint8Array | Promise<string | Uint8Array>, opts: UpdateOptions & { encoding: 'buffer' }): Promise<boolean>;

/** Appends data to the file under its lock, in one write followed by an fsync. */
export function append(file: string, data: string | Uint8Array, opts?: FileOptions): Promise<void>;

/** Reports the lock's state without taking it. */
export function status(target: string | undefined, opts?: StatusOptions): Promise<Status>;

/** The options of the synchronous forms: those of the async ones but signal (bound waits with `wait`). */
export type SyncOptions<T> = Omit<T, 'signal'>;

/** lock(), synchronously: blocks the thread (asleep, no CPU) until the lock is held. */
export function lockSync(target: string | undefined, opts?: SyncOptions<LockOptions>): Lock;

/** tryLock(), synchronously. */
export function tryLockSync(target: string | undefined, opts?: Omit<LockOptions, 'wait' | 'signal'>): Lock;

/** withLock(), synchronously: fn must not return a promise. */
export function withLockSync<T>(target: string | undefined, fn: (lock: Lock) => T, opts?: SyncOptions<LockOptions>): T;

/** update(), synchronously: fn returns the new content itself. */
export function updateSync(file: string, fn: (old: string) => string | Uint8Array, opts?: SyncOptions<UpdateOptions> & { encoding?: 'utf8' }): boolean;
export function updateSync(file: string, fn: (old: Buffer) => string | Uint8Array, opts: SyncOptions<UpdateOptions> & { encoding: 'buffer' }): boolean;

/** append(), synchronously. */
export function appendSync(file: string, data: string | Uint8Array, opts?: SyncOptions<FileOptions>): void;

/** status(), synchronously. */
export function statusSync(target: string | undefined, opts?: StatusOptions): Status;
