// The drop-in's retries (js/retries.cjs) against the real schedule: the
// `retry` package proper-lockfile 4.1.2 depends on, installed with it.

import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { test } from 'node:test';

import { realDir, skipReal } from './proper-lockfile-real.js';

const require = createRequire(import.meta.url);
const { Retries, timeouts } = require('../retries.cjs');
const retry = () => require(join(realDir, '..', 'retry'));

const cases = [
  undefined,
  {},
  { retries: 0 },
  { retries: 3 },
  { retries: 5, factor: 3, minTimeout: 10 },
  { retries: 6, minTimeout: 100, maxTimeout: 1000 },
  { retries: 4, factor: 1, minTimeout: 50 },
  { retries: 2, factor: 1.5, minTimeout: 7 },
  { retries: 0, forever: true, minTimeout: 20 },
];

test('the pauses are the retry package\'s', { skip: skipReal }, () => {
  assert.ok(!skipReal, skipReal);
  for (const c of cases) assert.deepEqual(timeouts(c), retry().timeouts(c), JSON.stringify(c));
  assert.throws(() => timeouts({ minTimeout: 10, maxTimeout: 5 }), { message: 'minTimeout is greater than maxTimeout' });
  // randomize: each pause 1 to 2 times its base, ascending.
  const r = timeouts({ retries: 8, minTimeout: 100, randomize: true });
  const base = timeouts({ retries: 8, minTimeout: 100 });
  assert.deepEqual([...r].sort((a, b) => a - b), r);
  for (let i = 0; i < r.length; i++) {
    assert.ok(r[i] >= base[0], `${r[i]} below the first pause`);
    assert.ok(r[i] <= 2 * base[base.length - 1], `${r[i]} above twice the last pause`);
  }
});

test('the attempts and the error reported are the retry package\'s', { skip: skipReal }, async () => {
  assert.ok(!skipReal, skipReal);
  const errors = ['a', 'b', 'b', 'a', 'c', 'a', 'b'].map((m) => new Error(m));
  for (const opts of [{ retries: 2, minTimeout: 1 }, { retries: 6, minTimeout: 1, factor: 1 }, { retries: 20, minTimeout: 1, factor: 1 }]) {
    const op = retry().operation(opts);
    op.attempt(() => {});
    const ours = new Retries(opts);
    for (const err of errors) {
      const theirs = op.retry(err);
      const pause = ours.retry(err);
      assert.equal(pause >= 0, theirs, `${JSON.stringify(opts)}: ${err.message}`);
      if (!theirs) break;
    }
    op.stop();
    assert.equal(ours.mainError(), op.mainError(), JSON.stringify(opts));
  }
});

test('forever starts the cycle again; maxRetryTime ends it', async () => {
  const r = new Retries({ retries: 2, minTimeout: 5, forever: true });
  const pauses = [];
  for (let i = 0; i < 6; i++) pauses.push(r.retry(new Error('x')));
  assert.deepEqual(pauses, [5, 10, 5, 10, 5, 10]);
  const t = new Retries({ retries: 100, minTimeout: 5, maxRetryTime: 1 });
  await new Promise((resolve) => setTimeout(resolve, 10));
  assert.equal(t.retry(new Error('x')), -1);
  assert.equal(t.mainError().message, 'RetryOperation timeout occurred');
});
