import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { HoldError, update } from '../index.js';
import { holdBin, scratch } from './helpers.js';

// An update of another user's file, by an agent that may not give the new
// file that owner. Root always may, and CI runs the tests as root, so this
// file's agent runs as user nobody, through setpriv (util-linux). It is a
// file of its own because a test process has one agent, started with the
// HOLD_BIN of its first request.

const nobody = 65534;
const other = 4242; // the file's owner and group: neither root nor nobody

function whyNot() {
  if (process.platform !== 'linux' || process.getuid() !== 0) return 'needs root on Linux, to own files as another user and run the agent as nobody';
  try {
    execFileSync('setpriv', ['--version'], { stdio: 'ignore' });
  } catch {
    return 'setpriv (util-linux) is not installed';
  }
  return false;
}

test('allowOwnerChange lets update replace another user\'s file, with a HoldWarning that says so', { skip: whyNot() }, async () => {
  const dir = scratch();
  chmodSync(dir, 0o755);
  const pub = join(dir, 'pub');
  mkdirSync(pub);
  chmodSync(pub, 0o777);
  const bin = join(dir, 'hold');
  copyFileSync(holdBin, bin);
  chmodSync(bin, 0o755);
  const wrapper = join(dir, 'hold-as-nobody');
  writeFileSync(wrapper, `#!/bin/sh\ncd '${pub}' && exec setpriv --reuid=${nobody} --regid=${nobody} --clear-groups '${bin}' "$@"\n`, { mode: 0o755 });
  process.env.HOLD_BIN = wrapper;

  const file = join(pub, 'tracker');
  writeFileSync(file, 'v1\n');
  chmodSync(file, 0o666);
  chownSync(file, other, other);

  await assert.rejects(update(file, (old) => old.replace('v1', 'v2')), (err) => {
    assert.ok(err instanceof HoldError, String(err));
    assert.equal(err.code, 'EACCES');
    assert.match(err.message, /uid 4242/);
    assert.match(err.hint, /allowOwnerChange/);
    return true;
  });
  assert.equal(readFileSync(file, 'utf8'), 'v1\n');

  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on('warning', onWarning);
  try {
    assert.equal(await update(file, (old) => old.replace('v1', 'v2'), { allowOwnerChange: true }), true);
    // process.emitWarning delivers on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', onWarning);
  }
  assert.equal(readFileSync(file, 'utf8'), 'v2\n');
  assert.equal(statSync(file).uid, nobody);
  assert.equal(warnings.length, 1, `warnings: ${warnings}`);
  assert.equal(warnings[0].name, 'HoldWarning');
  assert.equal(warnings[0].code, 'HOLD_UPDATE');
  assert.match(warnings[0].message, /tracker now belongs to uid 65534/);
});
