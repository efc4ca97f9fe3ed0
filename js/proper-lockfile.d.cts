// Types of @hold-dev/hold/proper-lockfile, for require() (proper-lockfile.d.ts
// gives them to import): proper-lockfile 4's API, on hold. The module is
// lock() itself, with the other functions as its properties, as
// proper-lockfile's is.

declare namespace lockfile {
  /** proper-lockfile's backoff object (its `retry` dependency's options). */
  interface RetryOptions {
    retries?: number;
    factor?: number;
    minTimeout?: number;
    maxTimeout?: number;
    randomize?: boolean;
    forever?: boolean;
    maxRetryTime?: number;
  }

  /** The options of lock() and lockSync(). */
  interface LockOptions {
    /** Milliseconds after which a holder that cannot be asked is stale (at least 2000; default 10000). */
    stale?: number;
    /** Milliseconds between time stamp refreshes (the agent refreshes at least this often). */
    update?: number;
    /** Attempts after the first, or a backoff object; not with lockSync. */
    retries?: number | RetryOptions;
    /** Resolve the file with fs.realpath (default true): a missing file fails with ENOENT. */
    realpath?: boolean;
    /** Used for realpath only: the agent makes the lock directory. */
    fs?: unknown;
    /** Called when the lock is lost; the default throws. */
    onCompromised?: (err: Error) => unknown;
    /** The lock directory, instead of `${file}.lock`. */
    lockfilePath?: string;
  }

  /** The options of unlock() and unlockSync(). */
  interface UnlockOptions {
    realpath?: boolean;
    fs?: unknown;
    lockfilePath?: string;
  }

  /** The options of check() and checkSync(). */
  interface CheckOptions {
    stale?: number;
    realpath?: boolean;
    fs?: unknown;
    lockfilePath?: string;
  }

  /** Takes the lock of file; resolves to its release function. */
  function lock(file: string, options?: LockOptions): Promise<() => Promise<void>>;
  /** Releases the lock of file this process holds (ENOTACQUIRED otherwise). */
  function unlock(file: string, options?: UnlockOptions): Promise<void>;
  /** Whether file is locked. */
  function check(file: string, options?: CheckOptions): Promise<boolean>;
  /** lock(), synchronously; returns the release function. */
  function lockSync(file: string, options?: LockOptions): () => void;
  /** unlock(), synchronously. */
  function unlockSync(file: string, options?: UnlockOptions): void;
  /** check(), synchronously. */
  function checkSync(file: string, options?: CheckOptions): boolean;

  /** A lock this process holds, as getLocks() lists it. */
  interface HeldLock {
    /** The lock directory. */
    lockfilePath: string;
    /** lock()'s options, with its defaults filled in. */
    options: LockOptions;
    /** The lock directory's time stamp, as last refreshed; null if it is gone. */
    mtime: Date | null;
    /** The precision of mtime: 'ms'. */
    mtimePrecision: 'ms' | 's';
    /** mtime in ms since the epoch; null if the directory is gone. */
    lastUpdate: number | null;
    /** false: released locks are not listed. */
    released: boolean;
  }

  /** The locks this process holds through this module, by canonical file path (a snapshot). */
  function getLocks(): Record<string, HeldLock>;
}

/** Takes the lock of file; resolves to its release function (lockfile.lock). */
declare function lockfile(file: string, options?: lockfile.LockOptions): Promise<() => Promise<void>>;

export = lockfile;
