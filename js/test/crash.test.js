import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

import { lock, tryLock, HoldError } from '../index.js';
import { alive, hangLimit, holdBin, scratch, start, startGroup, startWorker, waitGone, withTimeout } from './helpers.js';

test('a SIGKILLed holder frees the lock at once, and its agent exits', async () => {
  const target = join(scratch(), 'db');
  const holder = startWorker(['hold', target]);
  const { agent } = JSON.parse(await holder.line());
  assert.ok(alive(agent));
  await assert.rejects(tryLock(target), { code: 'EBUSY' });

  const waiting = lock(target, { wait: 10 });
  holder.kill('SIGKILL');
  // The kernel frees the lock when the agent's descriptor closes; the
  // agent sees end of input and exits. No staleness period applies: a wait
  // of 10 s (proper-lockfile's stale time) would be more than enough.
  const l = await waiting;
  assert.notEqual(l.owner.pid, agent);
  await l.release();
  await waitGone(agent);
});

test('a holder whose event loop is blocked for 15 s keeps its lock', { timeout: 120_000 }, async () => {
  const target = join(scratch(), 'db');
  const holder = startWorker(['block', target, '15']);
  const [word, blockedAt] = (await holder.line()).split(' ');
  assert.equal(word, 'locked');
  // The holder's event loop runs again 15 s after blockedAt (same clock).
  const unblocked = Number(blockedAt) + 15_000;
  let probes = 0;
  const released = holder.line().then(() => 'released');
  // Nobody else gets the lock while the holder is blocked.
  for (;;) {
    const r = await Promise.race([released, new Promise((res) => setTimeout(() => res('probe'), 500))]);
    if (r === 'released') break;
    try {
      const l = await tryLock(target);
      await l.release();
      if (Date.now() < unblocked) assert.fail('the lock was taken while its holder was blocked');
    } catch (err) {
      if (!(err instanceof HoldError)) throw err;
      assert.equal(err.code, 'EBUSY');
      probes++;
    }
    if (Date.now() > unblocked + hangLimit) assert.fail('the blocked holder never released');
  }
  assert.ok(probes >= 10, `only ${probes} probes found the lock held`);
  const r = await holder.exited;
  assert.equal(r.code, 0, r.stderr);
  const l = await tryLock(target);
  await l.release();
});

test('an agent killed under a holder aborts its signal, and release() rejects ELOST', async () => {
  const dir = scratch();
  const l = await lock(join(dir, 'a'));
  // Someone else holds b: a wait for it is pending when the agent dies.
  const other = startGroup(holdBin, ['run', join(dir, 'b'), '-c', 'echo held; sleep 600']);
  try {
    assert.equal(await other.line(), 'held');
    const pending = lock(join(dir, 'b'));
    const aborted = new Promise((resolve) => l.signal.addEventListener('abort', () => resolve(l.signal.reason)));
    process.kill(l.owner.pid, 'SIGKILL');
    const reason = await withTimeout(aborted, 'the lock signal');
    assert.ok(reason instanceof HoldError);
    assert.equal(reason.code, 'ELOST');
    await assert.rejects(pending, { code: 'EAGENT' });
    await assert.rejects(l.release(), { code: 'ELOST' });
    await assert.rejects(l.release(), { code: 'ELOST' });
    // The next call starts a new agent.
    const again = await lock(join(dir, 'a'));
    assert.notEqual(again.owner.pid, l.owner.pid);
    await again.release();
  } finally {
    other.killGroup();
  }
  await other.exited;
});

test('a script that has released its locks exits on its own', async () => {
  const w = startWorker(['idle', join(scratch(), 'x')]);
  const r = await w.exited;
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout, 'done\n');
});

test('a script that ends holding a lock exits, and the lock is freed', async () => {
  // A held lock does not keep the process alive: the script ends, or
  // calls process.exit, and its agent, seeing its input end, releases it.
  for (const [how, body] of [
    ['ends', 'const l = await lock(T); console.log(l.owner.pid);'],
    ['ends, held synchronously', 'const l = lockSync(T); console.log(l.owner.pid);'],
    ['calls process.exit', 'const l = await lock(T); console.log(l.owner.pid); setInterval(() => {}, 1000); process.exit(3);'],
  ]) {
    const target = join(scratch(), 't');
    const child = start(process.execPath, ['--input-type=module', '-e', `
      import { lock, lockSync } from ${JSON.stringify(new URL('../index.js', import.meta.url).href)};
      const T = ${JSON.stringify(target)};
      ${body}
    `]);
    const r = await child.exited;
    assert.equal(r.code, how === 'calls process.exit' ? 3 : 0, `${how}: ${r.stderr}`);
    await waitGone(Number(r.stdout.trim()));
    const l = await tryLock(target);
    await l.release();
  }
});

test('a missing hold executable is an EAGENT error that says what to do', async () => {
  const child = start(process.execPath, ['--input-type=module', '-e', `
    import { lock } from ${JSON.stringify(new URL('../index.js', import.meta.url).href)};
    await lock('t').catch((e) => console.log(e.code, e.message));
  `], { env: { ...process.env, HOLD_BIN: join(scratch(), 'no-such-hold') } });
  const r = await child.exited;
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^EAGENT cannot start the hold agent .*no-such-hold.*HOLD_BIN/);
});
