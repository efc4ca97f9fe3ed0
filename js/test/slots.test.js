// Semaphores ({ slots: n }): async and sync acquisitions each get a slot
// of their own, lock.slot says which, and the agent's checks come back.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';

import { lock, lockSync, status, tryLock, tryLockSync } from '../index.js';
import { scratch } from './helpers.js';

test('slots: async and sync holders share a semaphore', { skip: process.platform === 'win32' && 'kernel semaphores are unix-only' }, async () => {
  const target = join(scratch(), 'builds');
  const a = await lock(target, { slots: 3 });
  const b = lockSync(target, { slots: 3 });
  const c = await tryLock(target, { slots: 3 });
  assert.deepEqual([a.slot, b.slot, c.slot].sort(), [0, 1, 2]);
  assert.ok(b.token > a.token && c.token > b.token, 'tokens rise across slots');
  await assert.rejects(tryLock(target, { slots: 3 }), { code: 'EBUSY', message: /all 3 slots are held/ });
  assert.throws(() => tryLockSync(target, { slots: 2 }), { code: 'EINVAL', message: /3 in use, 2 asked for/ });
  const st = await status(target);
  assert.equal(st.slots, 3);
  assert.equal(st.slots_held, 3);
  await b.release();
  const d = lockSync(target, { slots: 3, wait: 5 });
  assert.equal(d.slot, b.slot, 'the freed slot is the one taken');
  d.releaseSync();
  await a.release();
  await c.release();
  const plain = await lock(target);
  assert.equal(plain.slot, 0);
  await plain.release();
  await assert.rejects(lock(target, { slots: 0 }), { code: 'EINVAL', message: /at least 1/ });
  assert.throws(() => lockSync(target, { slots: 'two' }), { code: 'EINVAL', message: /slots/ });
});
