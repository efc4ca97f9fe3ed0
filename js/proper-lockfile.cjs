// @hold-dev/hold/proper-lockfile: proper-lockfile's API on hold.
//
// A program written for proper-lockfile (4.x) switches by changing its
// import: lock, unlock, check, lockSync, unlockSync and checkSync take
// the same arguments and options (and getLocks, which proper-lockfile
// keeps in lib/lockfile, lists the locks held), lock() resolves to the same release
// function, and failures carry the same codes and messages (ELOCKED,
// ENOTACQUIRED, ERELEASED, ECOMPROMISED, ESYNC, and the file system's own
// ENOENT when `realpath` finds no file).
//
// The lock is the one proper-lockfile takes: the directory <file>.lock
// (or `lockfilePath`), on hold's portable protocol, so that processes
// using proper-lockfile and processes using this module exclude each
// other. Underneath, the lock belongs to the package's `hold agent`: it
// writes an owner record into the directory, refreshes its time stamp,
// releases it when this process exits or crashes (proper-lockfile's
// exit handler cannot run on a crash), and takes over a lock whose holder
// is dead at once, where proper-lockfile waits for the time stamp to age.
//
// How each option maps:
// - stale (ms, at least 2000, default 10000): the lock's stale time; a
//   holder that cannot be asked whether it lives (a proper-lockfile
//   holder writes no owner record) is taken over once its time stamp is
//   older. A holder alive on this host is never taken over. check()
//   passes it to the agent, whose library judges staleness by it (one
//   rule for lock and check).
// - update (ms, between 1000 and stale/2, default stale/2): how often the
//   agent refreshes the time stamp, as proper-lockfile's timer does; a
//   refresh that finds the time stamp set by someone else since the last
//   one reports the lock compromised (ECOMPROMISED, "Unable to update
//   lock within the stale threshold"), as proper-lockfile's "mtime is not
//   ours" does.
// - retries: a number, or the backoff object {retries, factor,
//   minTimeout, maxTimeout, randomize, forever, maxRetryTime}, with
//   proper-lockfile's schedule (its `retry` dependency's; retries.cjs). Not allowed
//   with the sync API (ESYNC), as there.
// - realpath (default true): resolves the file with fs.realpath, so a
//   missing file fails with ENOENT; false resolves the path only.
// - onCompromised(err): called when the lock is lost (its directory
//   removed or taken over); the default throws, as proper-lockfile's does.
// - lockfilePath: the lock directory to use instead of <file>.lock.
// - fs: used for realpath only. The lock directory is made and removed by
//   the agent, a separate process, so an fs of this process (a mock such
//   as memfs, or graceful-fs) cannot host it.

'use strict';

const path = require('path');
const nodeFs = require('fs');

const hold = require('./index.cjs');
const { Retries } = require('./retries.cjs');

/** The locks this process holds, by the canonical path of their file, as proper-lockfile keys them. */
const locks = new Map();

function withCode(err, code, extra) {
  return Object.assign(err, { code }, extra);
}

/** Fills in proper-lockfile's defaults and checks what it checks. */
function lockOptions(options) {
  const o = {
    stale: 10000,
    update: null,
    realpath: true,
    retries: 0,
    fs: nodeFs,
    onCompromised: (err) => { throw err; },
    ...options,
  };
  o.retries = o.retries || 0;
  o.retries = typeof o.retries === 'number' ? { retries: o.retries } : o.retries;
  o.stale = Math.max(o.stale || 0, 2000);
  o.update = o.update == null ? o.stale / 2 : o.update || 0;
  o.update = Math.max(Math.min(o.update, o.stale / 2), 1000);
  if (typeof o.onCompromised !== 'function') throw new TypeError(`onCompromised must be a function (called with the error when the lock is lost), not ${typeof o.onCompromised}`);
  return o;
}

/**
 * The lock directory of file (absolute: the agent, which takes it, keeps
 * the working directory it started in, which a later chdir leaves).
 */
function lockfileOf(file, o) {
  return o.lockfilePath ? path.resolve(o.lockfilePath) : `${file}.lock`;
}

/** The canonical path of file: fs.realpath with `realpath`, else path.resolve. */
function canonical(file, o) {
  if (!o.realpath) return Promise.resolve(path.resolve(file));
  const fs = o.fs || nodeFs;
  return new Promise((resolve, reject) => {
    fs.realpath(file, (err, p) => (err ? reject(err) : resolve(p)));
  });
}

function canonicalSync(file, o) {
  if (!o.realpath) return path.resolve(file);
  return (o.fs || nodeFs).realpathSync(file);
}

/** hold's request options for the lock of file. */
function holdOptions(file, o) {
  return {
    lockFile: lockfileOf(file, o), protocol: 'dir', stale: o.stale / 1000,
    // proper-lockfile's update timer: refresh every `update`, and call a
    // time stamp someone else set a compromise.
    heartbeat: o.update / 1000, lostIfTouched: true,
  };
}

/** proper-lockfile's error for what hold's tryLock threw. */
function attemptError(err, file) {
  if (err && err.code === 'EBUSY') {
    const out = withCode(new Error('Lock file is already being held'), 'ELOCKED', { file });
    if (err.holder) out.holder = err.holder;
    out.cause = err;
    return out;
  }
  return err;
}

/** Records l as file's lock, with its compromise watch and release function. */
function held(file, o, l, sync) {
  const entry = { lock: l, options: o, released: false, lockfilePath: lockfileOf(file, o) };
  locks.set(file, entry);
  const signal = l.signal;
  const onLost = () => {
    if (entry.released) return;
    entry.released = true;
    if (locks.get(file) === entry) locks.delete(file);
    const err = compromised(entry.lockfilePath, signal.reason);
    // Outside the abort event, so that the default, which throws, throws
    // as an uncaught exception, as proper-lockfile's does.
    process.nextTick(() => o.onCompromised(err));
  };
  if (signal.aborted) onLost();
  else signal.addEventListener('abort', onLost, { once: true });
  entry.stopWatch = () => signal.removeEventListener('abort', onLost);
  const releasedError = () => withCode(new Error('Lock is already released'), 'ERELEASED');
  if (sync) {
    return () => {
      if (entry.released) throw releasedError();
      unlockSync(file, { ...o, realpath: false });
    };
  }
  return () => {
    if (entry.released) return Promise.reject(releasedError());
    return unlock(file, { ...o, realpath: false });
  };
}

/**
 * proper-lockfile's ECOMPROMISED error: the file system's ENOENT when the
 * lock directory is gone, else "Unable to update lock within the stale
 * threshold". hold's error is its cause.
 */
function compromised(lockfilePath, cause) {
  let err;
  try {
    nodeFs.statSync(lockfilePath);
    err = new Error('Unable to update lock within the stale threshold');
  } catch (statErr) {
    err = statErr;
  }
  return withCode(err, 'ECOMPROMISED', { cause });
}

/**
 * Takes the lock of file; resolves to the function that releases it
 * (a promise; a second call rejects with ERELEASED). Rejects with ELOCKED
 * when it is held and the retries ran out.
 */
async function lock(file, options) {
  const o = lockOptions(options);
  const canon = await canonical(file, o);
  const retries = new Retries(o.retries);
  for (;;) {
    let pause;
    try {
      const l = await hold.tryLock(undefined, holdOptions(canon, o));
      return held(canon, o, l, false);
    } catch (err) {
      pause = retries.retry(attemptError(err, canon));
    }
    if (pause < 0) throw retries.mainError();
    await new Promise((resolve) => setTimeout(resolve, pause));
  }
}

function syncOptions(options) {
  const o = { ...options };
  const r = o.retries;
  if ((typeof r === 'number' && r > 0) || (r && typeof r.retries === 'number' && r.retries > 0)) {
    throw withCode(new Error('Cannot use retries with the sync api'), 'ESYNC');
  }
  return o;
}

/** lock(), synchronously: returns the release function (which throws ERELEASED the second time). */
function lockSync(file, options) {
  const o = lockOptions(syncOptions(options));
  const canon = canonicalSync(file, o);
  let l;
  try {
    l = hold.tryLockSync(undefined, holdOptions(canon, o));
  } catch (err) {
    throw attemptError(err, canon);
  }
  return held(canon, o, l, true);
}

function notAcquired() {
  return withCode(new Error('Lock is not acquired/owned by you'), 'ENOTACQUIRED');
}

/** Takes file's lock entry off the books, before its release. */
function forget(file) {
  const entry = locks.get(file);
  if (!entry) return null;
  entry.released = true;
  entry.stopWatch();
  locks.delete(file);
  return entry;
}

/**
 * Whether a release error means the lock is gone anyway: proper-lockfile's
 * unlock ignores a lock directory that vanished (ENOENT); hold says ELOST
 * (and, unlike an rmdir, leaves whoever took it over their lock).
 */
function gone(err) {
  return err && (err.code === 'ELOST' || err.code === 'ENOLOCK');
}

/** Releases the lock of file that this process holds; rejects with ENOTACQUIRED if it holds none. */
async function unlock(file, options) {
  const o = { fs: nodeFs, realpath: true, ...options };
  const canon = await canonical(file, o);
  const entry = forget(canon);
  if (!entry) throw notAcquired();
  try {
    await entry.lock.release();
  } catch (err) {
    if (!gone(err)) throw err;
  }
}

/** unlock(), synchronously. */
function unlockSync(file, options) {
  const o = { fs: nodeFs, realpath: true, ...syncOptions(options) };
  const canon = canonicalSync(file, o);
  const entry = forget(canon);
  if (!entry) throw notAcquired();
  try {
    entry.lock.releaseSync();
  } catch (err) {
    if (!gone(err)) throw err;
  }
}

function checkOptions(options) {
  const o = { stale: 10000, realpath: true, fs: nodeFs, ...options };
  o.stale = Math.max(o.stale || 0, 2000);
  return o;
}

/**
 * hold's status request for the lock of file, judged by the caller's
 * `stale`: the agent's library decides whether a holder it cannot ask (a
 * proper-lockfile holder, another host's) is stale, by the one rule an
 * acquisition with that stale time follows.
 */
function checkRequest(canon, o) {
  return { lockFile: lockfileOf(canon, o), protocol: 'dir', stale: o.stale / 1000 };
}

/** Resolves with whether file is locked (by this process or another, through hold or proper-lockfile). */
async function check(file, options) {
  const o = checkOptions(options);
  const canon = await canonical(file, o);
  return (await hold.status(undefined, checkRequest(canon, o))).held;
}

/** check(), synchronously. */
function checkSync(file, options) {
  const o = checkOptions(syncOptions(options));
  const canon = canonicalSync(file, o);
  return hold.statusSync(undefined, checkRequest(canon, o)).held;
}

/**
 * The locks this process holds through this module, as proper-lockfile's
 * lib/lockfile getLocks() lists them: an object keyed by each locked
 * file's canonical path, whose values have `lockfilePath`, `options` (as
 * lock() filled them in), `mtime` (the lock directory's time stamp, as the
 * agent last refreshed it), `mtimePrecision` and `lastUpdate` (that time
 * stamp, in ms), and `released` (false). A snapshot: unlock() removes a
 * lock from later calls' answers, not from an object already returned.
 */
function getLocks() {
  const out = {};
  for (const [file, entry] of locks) {
    let mtime = null;
    try {
      mtime = nodeFs.statSync(entry.lockfilePath).mtime;
    } catch {
      // Gone already: the lock is being reported lost (onCompromised).
    }
    out[file] = {
      lockfilePath: entry.lockfilePath,
      options: entry.options,
      mtime,
      mtimePrecision: 'ms',
      lastUpdate: mtime ? mtime.getTime() : null,
      released: entry.released,
    };
  }
  return out;
}

module.exports = lock;
module.exports.lock = lock;
module.exports.unlock = unlock;
module.exports.lockSync = lockSync;
module.exports.unlockSync = unlockSync;
module.exports.check = check;
module.exports.checkSync = checkSync;
module.exports.getLocks = getLocks;
