import assert from 'node:assert/strict';
import { test } from 'node:test';

import { lock, status, tryLock } from '../index.js';
import './helpers.js';

// etcd:// targets work as on the command line: the agent relays them to a
// hold-remote sub-agent. The Go test that runs `npm test` starts an etcd
// server and names it in HOLD_TEST_ETCD (host:port).
const etcd = process.env.HOLD_TEST_ETCD;

test('etcd:// targets', { skip: !etcd && 'HOLD_TEST_ETCD not set (internal/cli TestNodePackage sets it)' }, async () => {
  const target = `etcd://${etcd}/locks/js-${process.pid}`;
  const l = await lock(target, { settings: { ttl: '5' }, fields: { job: 'js' } });
  assert.equal(l.protocol, 'etcd');
  assert.ok(l.token > 0);
  const err = await tryLock(target).catch((e) => e);
  assert.equal(err.code, 'EBUSY');
  assert.match(err.message, new RegExp(`pid ${l.owner.pid}\\b`));
  const st = await status(target);
  assert.equal(st.state, 'held exclusive');
  assert.equal(st.holder.fields.job, 'js');
  await l.release();
  const again = await tryLock(target);
  assert.ok(again.token > l.token);
  await again.release();
});
