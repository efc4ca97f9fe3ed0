// Releases written ahead of their replies (the synchronous channel's
// pipeline, protocol 4): a kernel lock's release costs no round trip of
// its own. The lock is free for the next holder at once, whatever the
// releasing process does next; a release that failed is never dropped:
// the next call throws it, or the process's exit prints it.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { lock, lockSync, status, tryLock, tryLockSync } from '../index.js';
import { scratch, start } from './helpers.js';

const index = JSON.stringify(new URL('../index.js', import.meta.url).href);

/** Runs an ES module snippet in a new Node process, with hold and fs imported. */
function script(body, opts) {
  return start(process.execPath, ['--input-type=module', '-e', `import * as hold from ${index};\nimport * as fs from 'node:fs';\n${body}`], opts);
}

// Releases go ahead only where the agent can tell when the client let go
// (it reads the clients' monotonic clock on Linux), and only on the
// synchronous channel.
const ahead = process.platform === 'linux' && process.env.HOLD_AGENT_SYNC !== '0';

// What a child does to lose a kernel lock without hearing of it: it
// removes the lock file and keeps its thread (and so its event loop,
// which would deliver the agent's "lost" event) blocked for ms, while the
// agent's watch, which looks once a second, finds the loss. It doubles ms
// until the next call throws, for a machine too busy for the agent to
// look in time.
const LOSE_UNHEARD = `
const nap = new Int32Array(new SharedArrayBuffer(4));
function loseUnheard(l, ms) {
  fs.rmSync(l.path);
  Atomics.wait(nap, 0, 0, ms);
}
`;

test('the next holder gets a released lock while the releaser is idle', async () => {
  // The releaser's thread blocks right after release(), making no other
  // call: the release must be in the agent's input already.
  const target = join(scratch(), 'db');
  const child = script(`
    const l = await hold.lock(${JSON.stringify(target)});
    console.log('held');
    fs.readSync(0, Buffer.alloc(1));
    await l.release();
    console.log('released');
    fs.readSync(0, Buffer.alloc(1)); // blocked, holding nothing, until told to end
  `, { stdio: ['pipe', 'pipe', 'pipe'] });
  assert.equal(await child.line(), 'held');
  await assert.rejects(tryLock(target), { code: 'EBUSY' });
  child.stdin.write('\n');
  assert.equal(await child.line(), 'released');
  const l = await lock(target, { wait: 60 });
  assert.equal((await status(target)).holder.pid, l.owner.pid);
  await l.release();
  child.stdin.end('\n');
  const { code, stderr } = await child.exited;
  assert.equal(code, 0, stderr);
});

test('a release written ahead that finds its lock lost is thrown by the next call', { skip: !ahead && 'no release is written ahead here' }, async () => {
  const dir = scratch();
  const [t, other] = [join(dir, 'db'), join(dir, 'other')];
  const child = script(`
    ${LOSE_UNHEARD}
    const T = ${JSON.stringify(t)}, OTHER = ${JSON.stringify(other)};
    const out = {};
    // The synchronous API: releaseSync returns; tryLockSync throws.
    for (let ms = 1500; !out.sync; ms *= 2) {
      if (ms > 30000) throw new Error('the agent never found a removed lock file lost');
      const l = hold.lockSync(T);
      loseUnheard(l, ms);
      l.releaseSync();
      try {
        hold.tryLockSync(OTHER).releaseSync();
      } catch (err) {
        out.sync = { code: err.code, message: err.message, path: l.path, aborted: l.signal.aborted };
      }
    }
    // The call that threw kept nothing, and threw it once.
    hold.tryLockSync(OTHER).releaseSync();
    // The async API: release() resolves; tryLock() rejects. In withLock,
    // whose function reads a token, and with it the release's reply, then
    // throws: withLock throws the function's error and leaves the failure
    // for the next call.
    for (let ms = 1500; !out.async; ms *= 2) {
      if (ms > 30000) throw new Error('the agent never found a removed lock file lost, or a failure was dropped');
      let l;
      const mine = await hold.withLock(OTHER, async (k) => {
        l = await hold.lock(T);
        loseUnheard(l, ms);
        await l.release();
        await l.release(); // idempotent, as ever
        if (!(k.token > 0)) throw new Error('no token');
        throw new Error('mine');
      }).catch((err) => err);
      if (mine.message !== 'mine') throw new Error('withLock threw ' + mine.message + ", not its function's error");
      try {
        await (await hold.tryLock(OTHER)).release();
      } catch (err) {
        out.async = { code: err.code, message: err.message, path: l.path, aborted: l.signal.aborted, reason: l.signal.reason?.code };
      }
    }
    await (await hold.tryLock(OTHER)).release();
    console.log(JSON.stringify(out));
  `);
  const { code, stdout, stderr } = await child.exited;
  assert.equal(code, 0, stderr);
  const out = JSON.parse(stdout);
  for (const how of ['sync', 'async']) {
    assert.equal(out[how].code, 'ELOST', `${how}: ${out[how].message}`);
    assert.ok(out[how].message.includes(out[how].path), `${how}: ${out[how].message}`);
    assert.equal(out[how].aborted, true, `${how}: the lost lock's signal`);
  }
  assert.equal(out.async.reason, 'ELOST');
  assert.equal((await status(other)).state, 'free');
});

test('a release written ahead that fails as the process exits is printed', { skip: !ahead && 'no release is written ahead here' }, async () => {
  const target = join(scratch(), 'db');
  let stderr = '';
  for (let ms = 1500; !stderr.includes('HoldWarning'); ms *= 2) {
    assert.ok(ms <= 30000, `no warning of the failed release; last stderr: ${stderr}`);
    const child = script(`
      ${LOSE_UNHEARD}
      const l = hold.lockSync(${JSON.stringify(target)});
      loseUnheard(l, ${ms});
      l.releaseSync(); // and nothing after it: the exit reads its reply
    `);
    const done = await child.exited;
    assert.equal(done.code, 0, done.stderr);
    stderr = done.stderr;
  }
  assert.match(stderr, /HoldWarning: .*lost/);
  assert.ok(stderr.includes(`${target}.lock`), stderr);
});

test('more releases written ahead than may wait for their replies', () => {
  const dir = scratch();
  const locks = [];
  for (let i = 0; i < 200; i++) locks.push(lockSync(join(dir, `l${i}`)));
  for (const l of locks) l.release();
  for (let i = 0; i < 200; i++) tryLockSync(join(dir, `l${i}`)).releaseSync();
});

test('a request on the standard channel comes after the releases written before it', async () => {
  const target = join(scratch(), 'db');
  for (let i = 0; i < 50; i++) {
    const l = await lock(target);
    l.release(); // not awaited: status, on stdin, must still see it done
    assert.equal((await status(target)).state, 'free', `round ${i}`);
  }
});

test('a portable lock\'s release is waited for: its directory is gone when it resolves', async () => {
  const l = await lock(join(scratch(), 'db'), { protocol: 'dir' });
  assert.ok(existsSync(l.path));
  await l.release();
  assert.equal(existsSync(l.path), false);
});
