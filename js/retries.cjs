// proper-lockfile's retries, for @hold-dev/hold/proper-lockfile: the
// schedule of its `retry` dependency (0.12), computed the same way, so that
// a caller's `retries` option waits as long, as many times, and fails with
// the same error as it did under proper-lockfile.

'use strict';

/**
 * The pauses between attempts, in ms, ascending: attempt i (from 0) waits
 * minTimeout * factor^i, times a random 1 to 2 with `randomize`, at most
 * maxTimeout. Defaults: 10 retries, factor 2, minTimeout 1000, no maximum.
 */
function timeouts(options) {
  const opts = { retries: 10, factor: 2, minTimeout: 1000, maxTimeout: Infinity, randomize: false, ...options };
  if (opts.minTimeout > opts.maxTimeout) throw new Error('minTimeout is greater than maxTimeout');
  const pause = (i) => {
    const random = opts.randomize ? Math.random() + 1 : 1;
    return Math.min(Math.round(random * opts.minTimeout * opts.factor ** i), opts.maxTimeout);
  };
  const out = [];
  let i = 0;
  for (; i < opts.retries; i++) out.push(pause(i));
  if (options && options.forever && out.length === 0) out.push(pause(i));
  return out.sort((a, b) => a - b);
}

/**
 * One lock's attempts: retry(err) records a failed attempt's error and
 * returns how long to pause before the next, or -1 when there is none
 * (the retries are used up, or maxRetryTime has passed); mainError() is
 * then the error to report.
 */
class Retries {
  constructor(options) {
    this.pauses = timeouts(options);
    this.cycle = options && options.forever ? this.pauses.slice() : null;
    this.maxRetryTime = (options && options.maxRetryTime) || Infinity;
    this.start = Date.now();
    this.errors = [];
  }

  retry(err) {
    if (Date.now() - this.start >= this.maxRetryTime) {
      this.errors.unshift(new Error('RetryOperation timeout occurred'));
      return -1;
    }
    this.errors.push(err);
    let pause = this.pauses.shift();
    if (pause === undefined) {
      if (!this.cycle) return -1;
      // forever: start the cycle again, keeping only the last error.
      this.errors.splice(this.errors.length - 1, 1);
      this.pauses = this.cycle.slice();
      pause = this.pauses.shift();
    }
    return pause;
  }

  /** The error seen most often (by message; the latest of equals). */
  mainError() {
    const counts = new Map();
    let main = null;
    let most = 0;
    for (const err of this.errors) {
      const n = (counts.get(err.message) || 0) + 1;
      counts.set(err.message, n);
      if (n >= most) {
        main = err;
        most = n;
      }
    }
    return main;
  }
}

module.exports = { timeouts, Retries };
