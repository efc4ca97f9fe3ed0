// The synchronous API: same agent, options and errors as the async one.

import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import {
  appendSync, lock, lockSync, statusSync, tryLock, tryLockSync, updateSync, withLockSync,
} from '../index.js';
import { holdBin, scratch, start } from './helpers.js';

const index = JSON.stringify(new URL('../index.js', import.meta.url).href);

/** Runs an ES module snippet in a new Node process; resolves with its result. */
function script(body, opts) {
  return start(process.execPath, ['--input-type=module', '-e', `import * as hold from ${index};\n${body}`], opts);
}

test('a lock\'s token and owner record are asked for when first read, and rise across holders', async () => {
  const target = join(scratch(), 'db');
  const a = lockSync(target, { fields: { job: 'first' } });
  // Read while held: the agent writes the record that backs the token.
  assert.ok(a.token > 0);
  assert.equal(a.owner.fields.job, 'first');
  assert.equal(statusSync(target).token, a.token);
  assert.equal(statusSync(target).holder.pid, a.owner.pid);
  assert.deepEqual(JSON.parse(JSON.stringify(a)), { token: a.token, path: a.path, protocol: 'flock', owner: a.owner });
  a.releaseSync();
  assert.ok(a.token > 0, 'the token read while held is kept');
  // Released before anything asked: no token was handed out.
  const b = await lock(target);
  await b.release();
  assert.equal(b.token, 0);
  assert.equal(b.owner, null);
  const c = lockSync(target);
  assert.ok(c.token > a.token, `token ${c.token} after ${a.token}`);
  c.releaseSync();
});

test('lockSync, checkSync, releaseSync, tryLockSync, withLockSync', () => {
  const target = join(scratch(), 'db');
  const l = lockSync(target, { fields: { job: 'nightly' } });
  assert.equal(l.path, `${target}.lock`);
  assert.equal(l.owner.fields.job, 'nightly');
  assert.ok(l.token > 0);
  l.checkSync();
  assert.equal(statusSync(target).state, 'held exclusive');
  assert.throws(() => tryLockSync(target), { code: 'EBUSY', message: /held by pid \d+/ });
  l.releaseSync();
  l.releaseSync(); // idempotent
  assert.throws(() => l.checkSync(), { code: 'ELOST' });
  assert.equal(withLockSync(target, (k) => k.token > l.token), true);
  assert.throws(() => withLockSync(target, () => { throw new Error('boom'); }), /boom/);
  assert.throws(() => withLockSync(target, async () => {}), { code: 'EINVAL', message: /withLock/ });
  assert.equal(statusSync(target).state, 'free');
  assert.throws(() => lockSync(target, { signal: new AbortController().signal }), { code: 'EINVAL', message: /wait option/ });
  assert.throws(() => lockSync(target, { wait: -1 }), { code: 'EINVAL' });
  assert.throws(() => lockSync(target, { nope: 1 }), { code: 'EINVAL' });
});

test('updateSync and appendSync', () => {
  const file = join(scratch(), 'f.json');
  writeFileSync(file, '{"n":1}');
  assert.equal(updateSync(file, (old) => JSON.stringify({ n: JSON.parse(old).n + 1 })), true);
  assert.equal(updateSync(file, (old) => old), false);
  assert.throws(() => updateSync(file, () => { throw new Error('no'); }), /no/);
  assert.throws(() => updateSync(file, async () => 'x'), { code: 'EINVAL' });
  appendSync(file, '\n');
  assert.equal(readFileSync(file, 'utf8'), '{"n":2}\n');
  assert.throws(() => updateSync(join(scratch(), 'missing'), (s) => s, { mustExist: true }), { code: 'ENOENT' });
  // The lock is free again after each of them, failures included.
  tryLockSync(file).releaseSync();
});

test('updateSync refuses an empty result unless allowEmpty', () => {
  const file = join(scratch(), 'f');
  writeFileSync(file, 'keep\n');
  assert.throws(() => updateSync(file, () => ''), (err) => {
    assert.equal(err.code, 'EIO', String(err));
    assert.match(err.message, /empty/);
    assert.match(err.hint, /allowEmpty/);
    return true;
  });
  assert.equal(readFileSync(file, 'utf8'), 'keep\n');
  tryLockSync(file).releaseSync(); // the refusal released the lock
  assert.equal(updateSync(file, () => '', { allowEmpty: true }), true);
  assert.equal(readFileSync(file, 'utf8'), '');
});

test('sync and async callers in one process exclude each other', async () => {
  const target = join(scratch(), 't');
  const held = await lock(target);
  assert.throws(() => tryLockSync(target), { code: 'EBUSY' });
  held.releaseSync();
  const sync = lockSync(target);
  await assert.rejects(lock(target, { wait: 0.2 }), { code: 'ETIMEDOUT' });
  await assert.rejects(tryLock(target), { code: 'EBUSY' });
  const waiting = lock(target);
  sync.releaseSync();
  await (await waiting).release();
});

test('a synchronous wait for a lock this process holds is a deadlock, at once', async () => {
  // In a child, so that a hang would end with it rather than the tests.
  const target = join(scratch(), 't');
  const child = script(`
    const T = ${JSON.stringify(target)};
    const held = await hold.lock(T);
    for (const f of [() => hold.lockSync(T), () => hold.lockSync(T, { shared: true, wait: 60 }),
                     () => hold.updateSync(T, (s) => s, { lockFile: T + '.lock' })]) {
      try { f(); console.log('granted'); } catch (e) { console.log(e.code, e.message); }
    }
    const sync = hold.lockSync(T + '2');
    try { hold.lockSync(T + '2'); } catch (e) { console.log(e.code, e.message); }
    console.log(process.pid);
  `);
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  const r = await child.exited;
  clearTimeout(timer);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines.length, 5, r.stdout);
  // "This very process" is the program, not the agent serving it.
  const pid = lines.pop();
  for (const line of lines) assert.match(line, new RegExp(`^EDEADLK acquire .*deadlock: held by pid \\d+ .*this very process \\(pid ${pid}, through hold pid \\d+\\)`));
});

test('another spelling of a lock held here is a deadlock at once', async () => {
  // A symlinked directory, "..", and relative for absolute: one lock.
  const dir = scratch();
  mkdirSync(join(dir, 'real'));
  symlinkSync(join(dir, 'real'), join(dir, 'link'));
  const child = script(`
    process.chdir(${JSON.stringify(dir)});
    const held = hold.lockSync(${JSON.stringify(join(dir, 'real', 't'))});
    for (const T of [${JSON.stringify(join(dir, 'link', 't'))}, ${JSON.stringify(join(dir, 'real', '..', 'real', 't'))}, 'real/t']) {
      try { hold.lockSync(T, { wait: 60 }); console.log('granted'); } catch (e) { console.log(e.code, e.message); }
    }
  `);
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const r = await child.exited;
  clearTimeout(timer);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines.length, 3, r.stdout);
  for (const line of lines) assert.match(line, /^EDEADLK acquire .*deadlock: held by pid \d+ .*this very process/);
});

test('sync and async callers in different processes exclude each other', async () => {
  const dir = scratch();
  const target = join(dir, 't');
  const log = join(dir, 'log');
  writeFileSync(log, '');
  // The child holds the lock synchronously for 500 ms, logging in and out.
  const child = script(`
    import { appendFileSync } from 'node:fs';
    const l = hold.lockSync(${JSON.stringify(target)});
    appendFileSync(${JSON.stringify(log)}, 'child in\\n');
    console.log('locked');
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 500);
    appendFileSync(${JSON.stringify(log)}, 'child out\\n');
    l.releaseSync();
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    const again = await hold.lock(${JSON.stringify(target)});
    appendFileSync(${JSON.stringify(log)}, 'child async in\\n');
    await again.release();
  `);
  assert.equal(await child.line(), 'locked');
  await assert.rejects(tryLock(target), { code: 'EBUSY' });
  const l = lockSync(target); // blocks until the child releases
  assert.equal(readFileSync(log, 'utf8'), 'child in\nchild out\n');
  // Held synchronously here, the child's async lock() waits.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 600);
  assert.equal(readFileSync(log, 'utf8'), 'child in\nchild out\n');
  l.releaseSync();
  const r = await child.exited;
  assert.equal(r.code, 0, r.stderr);
  assert.equal(readFileSync(log, 'utf8'), 'child in\nchild out\nchild async in\n');
});

test('a synchronous wait sleeps: it burns no CPU', async () => {
  const target = join(scratch(), 't');
  const seconds = 2;
  const child = script(`
    const l = hold.lockSync(${JSON.stringify(target)});
    console.log('locked');
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ${seconds * 1000});
    l.releaseSync();
  `);
  assert.equal(await child.line(), 'locked');
  statusSync(target); // the agent and its channel are up: only the wait is measured
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  lockSync(target).releaseSync();
  const wall = performance.now() - t0;
  const used = process.cpuUsage(cpu);
  const cpuMs = (used.user + used.system) / 1000;
  assert.ok(wall > 500, `the wait was not a wait (${wall} ms)`);
  // A generous bound: a thread asleep in a read uses next to none (about
  // 1 ms here), one that polls uses a good part of the wall time even on a
  // machine so loaded that it gets a small share of a CPU (13% measured
  // with 8 test suites running on 2 CPUs).
  assert.ok(cpuMs < wall * 0.05, `the wait of ${wall.toFixed(0)} ms used ${cpuMs.toFixed(0)} ms of CPU`);
  await child.exited;
});

test('a per-lock stale time: an ownerless portable lock is taken once older than it', async () => {
  // An empty lock directory with an old heartbeat, as proper-lockfile
  // leaves one: nobody can be asked whether its holder lives, so its age
  // decides, by the stale time of the lock asked for.
  const target = join(scratch(), 't');
  mkdirSync(`${target}.lock`);
  const old = new Date(Date.now() - 5000);
  utimesSync(`${target}.lock`, old, old);
  assert.throws(() => tryLockSync(target, { protocol: 'dir' }), { code: 'EBUSY', message: /stale after 10s/ });
  await assert.rejects(tryLock(target, { protocol: 'dir', stale: 30 }), { code: 'EBUSY', message: /stale after 30s/ });
  const l = tryLockSync(target, { protocol: 'dir', stale: 2 });
  assert.equal(l.protocol, 'dir');
  l.releaseSync();
  assert.throws(() => tryLockSync(target, { protocol: 'dir', stale: 0 }), { code: 'EINVAL', message: /stale/ });
});

test('a lock that a hold run ancestor holds is a deadlock, at once, sync or async', async () => {
  // hold run releases its lock only when its command ends: a command that
  // waits for the same lock would wait for ever.
  const target = join(scratch(), 't');
  const child = start(holdBin, ['run', target, '--', process.execPath, '--input-type=module', '-e', `
    import * as hold from ${index};
    const T = ${JSON.stringify(target)};
    for (const f of [() => hold.lock(T), () => hold.lockSync(T), () => hold.lock(T, { wait: 60 }), () => hold.update(T, (s) => s)]) {
      try { await f(); console.log('granted'); } catch (e) { console.log(e.code, e.message); }
    }
  `]);
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  const r = await child.exited;
  clearTimeout(timer);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines.length, 4, r.stdout);
  for (const line of lines) assert.match(line, /^EDEADLK acquire .*deadlock: held by pid \d+ .*is an ancestor of this process \(pid \d+, through hold pid \d+\) that waits for it/);
});

test("a lost lock's error says what happened", () => {
  const target = join(scratch(), 'd');
  const l = lockSync(target, { protocol: 'dir' });
  rmSync(`${target}.lock`, { recursive: true });
  // The heartbeat (every second) finds it; checkSync asks each time.
  let err = null;
  for (let i = 0; i < 100 && !err; i++) {
    try {
      l.checkSync();
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
    } catch (e) {
      err = e;
    }
  }
  assert.equal(err?.code, 'ELOST');
  assert.match(err.message, /the lock directory was removed/);
  assert.throws(() => l.releaseSync(), { code: 'ELOST' });
});
