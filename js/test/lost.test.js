import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { lock } from '../index.js';
import { scratch, withTimeout } from './helpers.js';

const channel = process.env.HOLD_AGENT_SYNC === '0' ? 'standard channel' : 'synchronous channel';

test(`a kernel lock whose file is removed is lost unasked (${channel})`, async () => {
  const target = join(scratch(), 'db');
  const l = await lock(target);
  const kept = await lock(join(scratch(), 'other'));
  const aborted = new Promise((resolve) => l.signal.addEventListener('abort', resolve));
  rmSync(l.path);
  await withTimeout(aborted, 'the lost signal');
  assert.equal(l.signal.reason.code, 'ELOST');
  assert.match(l.signal.reason.message, /removed or replaced/);
  await assert.rejects(l.check(), { code: 'ELOST' });
  await assert.rejects(l.release(), { code: 'ELOST' });
  await kept.check();
  assert.equal(kept.signal.aborted, false);
  await kept.release();
});

test(`check() finds a removed lock file at once and aborts the signal (${channel})`, async () => {
  const target = join(scratch(), 'db');
  const l = await lock(target);
  rmSync(l.path);
  await assert.rejects(l.check(), { code: 'ELOST', message: /removed or replaced/ });
  assert.equal(l.signal.aborted, true);
  await assert.rejects(l.release(), { code: 'ELOST' });
});

test(`an idle portable lock with a stale time of 2 s keeps its lock (${channel})`, async () => {
  // Its heartbeat is fitted to the stale time it is judged by: before, it
  // beat once a second and was declared lost a second after a beat.
  // HOLD_TEST_LONG=1 holds it for a minute.
  const idle = process.env.HOLD_TEST_LONG === '1' ? 60_000 : 15_000;
  const l = await lock(join(scratch(), 'idle'), { protocol: 'dir', stale: 2 });
  await new Promise((resolve) => setTimeout(resolve, idle));
  assert.equal(l.signal.aborted, false, `lost: ${l.signal.reason?.message}`);
  await l.check();
  await l.release();
});
