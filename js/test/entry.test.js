import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

// The package resolves by its own name here (its exports map allows that),
// as a dependent project resolves it.
import * as esm from '@hold-dev/hold';

const require = createRequire(import.meta.url);

test('require and import load one implementation through the exports map', () => {
  assert.equal(require.resolve('@hold-dev/hold'), fileURLToPath(new URL('../index.cjs', import.meta.url)));
  assert.equal(import.meta.resolve('@hold-dev/hold'), new URL('../index.js', import.meta.url).href);
  const cjs = require('@hold-dev/hold');
  assert.deepEqual(Object.keys(esm).sort(), [
    'HoldError', 'append', 'appendSync', 'lock', 'lockSync', 'status', 'statusSync',
    'tryLock', 'tryLockSync', 'update', 'updateSync', 'withLock', 'withLockSync',
  ]);
  assert.deepEqual(Object.keys(cjs).sort(), Object.keys(esm).sort());
  // The same objects, not copies: one agent and one HoldError class.
  for (const name of Object.keys(esm)) assert.equal(esm[name], cjs[name], name);
});
