// @hold-dev/hold/proper-lockfile/lib/lockfile: proper-lockfile's
// lib/lockfile module on hold, for code that imports it directly (most
// often for getLocks, which proper-lockfile's main module does not
// export). Its functions take node-style callbacks, as lib/lockfile's do:
// lock(file, [options], callback(err, release)), where
// release([callback]) releases; unlock(file, [options], callback);
// check(file, [options], callback(err, isLocked)); getLocks().
//
// It shares its locks with @hold-dev/hold/proper-lockfile: a lock taken
// through either is listed by getLocks and released by either's unlock.
// Left pointing at proper-lockfile's own lib/lockfile, such an import
// would see none of hold's locks (and run proper-lockfile's heartbeat on
// any lock it took itself), so switch it with the main import.

'use strict';

const lockfile = require('./proper-lockfile.cjs');

/** Splits (options, callback) as lib/lockfile's optional options allow. */
function args(options, callback) {
  if (typeof options === 'function') return [undefined, options];
  if (typeof callback !== 'function') throw new TypeError('lib/lockfile functions take a callback as their last argument');
  return [options, callback];
}

/** Calls back with promise's outcome, outside the promise's chain, so that a throwing callback is uncaught as in lib/lockfile. */
function settle(promise, callback) {
  promise.then(
    (value) => process.nextTick(callback, null, value),
    (err) => process.nextTick(callback, err),
  );
}

/** lock(file, [options], callback(err, release)); release([callback]) releases it. */
function lock(file, options, callback) {
  [options, callback] = args(options, callback);
  settle(lockfile.lock(file, options).then((release) => (done) => {
    settle(release(), (err) => {
      if (done) done(err || null);
    });
  }), callback);
}

/** unlock(file, [options], callback(err)). */
function unlock(file, options, callback) {
  [options, callback] = args(options, callback);
  settle(lockfile.unlock(file, options), (err) => callback(err || null));
}

/** check(file, [options], callback(err, isLocked)). */
function check(file, options, callback) {
  [options, callback] = args(options, callback);
  settle(lockfile.check(file, options), callback);
}

module.exports.lock = lock;
module.exports.unlock = unlock;
module.exports.check = check;
module.exports.getLocks = lockfile.getLocks;
