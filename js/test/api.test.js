import assert from 'node:assert/strict';
import { existsSync, linkSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

import { append, HoldError, lock, status, tryLock, update, withLock } from '../index.js';
import { holdBin, scratch, startGroup } from './helpers.js';

test('lock, tokens, owner, status and release', async () => {
  const target = join(scratch(), 'db');
  const l = await lock(target, { fields: { job: 'nightly' } });
  assert.equal(l.path, `${target}.lock`);
  assert.equal(l.protocol, 'flock');
  assert.equal(l.owner.fields.job, 'nightly');
  assert.ok(l.token > 0);
  assert.equal(l.signal.aborted, false);
  const st = await status(target);
  assert.equal(st.state, 'held exclusive');
  assert.equal(st.holder.pid, l.owner.pid);
  assert.equal(st.token, l.token);
  await l.check();
  await l.release();
  await l.release(); // idempotent
  await assert.rejects(l.check(), { code: 'ELOST' });
  assert.equal((await status(target)).state, 'free');
  const again = await tryLock(target);
  assert.ok(again.token > l.token);
  await again.release();
});

test('a target ending in .lock is locked itself too, as flock(1) takes it', { skip: process.platform === 'win32' }, async () => {
  const target = join(scratch(), 'x.lock');
  const l = await lock(target);
  assert.equal(l.path, `${target}.lock`);
  // flock(1), another process, finds x.lock itself busy.
  const busy = spawnSync('flock', ['-n', target, 'true']);
  assert.equal(busy.error, undefined, 'flock(1) is needed (util-linux)');
  assert.equal(busy.status, 1, 'flock -n x.lock while lock("x.lock") holds it');
  assert.equal((await status(target)).state, 'held exclusive');
  await l.release();
  assert.equal(spawnSync('flock', ['-n', target, 'true']).status, 0);
  assert.equal(readFileSync(target, 'utf8'), '', 'hold wrote into x.lock');
});

test("a busy lock that flock(1) holds names flock's pid in err.holder", { skip: process.platform !== 'linux' }, async () => {
  // No owner record: the kernel's holder is the one named.
  const target = join(scratch(), 'f.lock');
  const flock = spawn('flock', [target, 'sleep', '60'], { stdio: 'ignore' });
  try {
    let err;
    for (let i = 0; i < 600 && !err; i++) {
      try {
        (await tryLock(target)).release();
        await new Promise((r) => setTimeout(r, 50)); // flock(1) has not locked it yet
      } catch (e) {
        err = e;
      }
    }
    assert.equal(err?.code, 'EBUSY', String(err));
    assert.equal(err.holder?.pid, flock.pid, JSON.stringify(err.holder));
    assert.equal(err.holder.alive, true);
    assert.deepEqual(err.holder.command, ['flock', target, 'sleep', '60']);
  } finally {
    flock.kill('SIGKILL');
  }
});

test('two locks of one target in one process exclude each other', async () => {
  const target = join(scratch(), 'db');
  const first = await lock(target);
  let second = null;
  const waiting = lock(target).then((l) => { second = l; });
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(second, null);
  await first.release();
  await waiting;
  assert.ok(second.token > first.token);
  await second.release();
});

test('shared locks go together, an exclusive one waits', async () => {
  const target = join(scratch(), 'db');
  const a = await lock(target, { shared: true });
  const b = await tryLock(target, { shared: true });
  await assert.rejects(tryLock(target), { code: 'EBUSY' });
  await a.release();
  await b.release();
});

test('named locks, lock files and the portable protocol', async () => {
  const dir = scratch();
  const named = await lock(undefined, { name: `js-test-${process.pid}` });
  assert.match(named.path, new RegExp(`js-test-${process.pid}`));
  assert.ok(named.path.startsWith(process.env.HOLD_TEST_NAMED_DIR), `${named.path} is not in the test's own directory`);
  await named.release();
  const lf = await lock('label', { lockFile: join(dir, 'exact.lock') });
  assert.equal(lf.path, join(dir, 'exact.lock'));
  await lf.release();
  const portable = await lock(join(dir, 'p'), { protocol: 'dir', wait: 5 });
  assert.equal(portable.protocol, 'dir');
  await assert.rejects(tryLock(join(dir, 'p'), { protocol: 'dir' }), { code: 'EBUSY' });
  await portable.release();
});

test('withLock returns what fn returns and releases whatever fn does', async () => {
  const target = join(scratch(), 'db');
  assert.equal(await withLock(target, (l) => l.token > 0 ? 'ok' : 'no'), 'ok');
  await assert.rejects(withLock(target, () => { throw new Error('boom'); }), /boom/);
  const l = await tryLock(target);
  await l.release();
});

test('update replaces the file atomically and writes nothing when fn throws', async () => {
  const dir = scratch();
  const file = join(dir, 'config.json');
  writeFileSync(file, '{"n":1}\n', { mode: 0o640 });
  assert.equal(await update(file, (old) => JSON.stringify({ n: JSON.parse(old).n + 1 }) + '\n'), true);
  assert.equal(readFileSync(file, 'utf8'), '{"n":2}\n');
  await assert.rejects(update(file, async () => { throw new Error('no thanks'); }), /no thanks/);
  assert.equal(readFileSync(file, 'utf8'), '{"n":2}\n');
  assert.equal(await update(file, (old) => old), false);
  await assert.rejects(update(file, () => undefined), { code: 'EINVAL' });
  const bin = await update(file, (old) => {
    assert.ok(Buffer.isBuffer(old));
    return Buffer.concat([old, Buffer.from([0, 255])]);
  }, { encoding: 'buffer' });
  assert.equal(bin, true);
  assert.deepEqual(readFileSync(file).subarray(-2), Buffer.from([0, 255]));
  await assert.rejects(update(join(dir, 'missing'), (o) => o, { mustExist: true }), { code: 'ENOENT' });
  // The lock is free after all of it.
  const l = await tryLock(file);
  await l.release();
});

test('append adds whole records', async () => {
  const file = join(scratch(), 'log');
  await Promise.all(Array.from({ length: 20 }, (_, i) => append(file, `line ${i}\n`)));
  await append(file, Buffer.from('bytes\n'));
  const lines = readFileSync(file, 'utf8').trim().split('\n');
  assert.equal(lines.length, 21);
});

test('update refuses a hard-linked file unless allowSplit, which leaves the other name the old content', async () => {
  const dir = scratch();
  const [a, b] = [join(dir, 'a'), join(dir, 'b')];
  writeFileSync(a, 'old\n');
  linkSync(a, b);
  let called = false;
  await assert.rejects(update(a, () => { called = true; return 'new\n'; }), (err) => {
    assert.ok(err instanceof HoldError, String(err));
    assert.equal(err.code, 'EACCES');
    assert.match(err.message, /2 hard links/);
    assert.match(err.hint, /allowSplit/);
    return true;
  });
  assert.equal(called, false, 'fn ran for a refused update');
  assert.equal(readFileSync(a, 'utf8'), 'old\n');
  assert.equal(readFileSync(b, 'utf8'), 'old\n');
  assert.equal(await update(a, (old) => old.replace('old', 'new'), { allowSplit: true }), true);
  assert.equal(readFileSync(a, 'utf8'), 'new\n');
  assert.equal(readFileSync(b, 'utf8'), 'old\n');
});

test('update refuses an empty result unless allowEmpty', async () => {
  const file = join(scratch(), 'f');
  writeFileSync(file, 'keep\n');
  const refused = (err) => {
    assert.ok(err instanceof HoldError, String(err));
    assert.equal(err.code, 'EIO');
    assert.match(err.message, /empty/);
    assert.match(err.hint, /allowEmpty/);
    return true;
  };
  await assert.rejects(update(file, () => ''), refused);
  assert.equal(readFileSync(file, 'utf8'), 'keep\n');
  await assert.rejects(update(file, () => Buffer.alloc(0), { encoding: 'buffer' }), refused);
  assert.equal(readFileSync(file, 'utf8'), 'keep\n');
  assert.equal(await update(file, () => '', { allowEmpty: true }), true);
  assert.equal(readFileSync(file, 'utf8'), '');
});

test('busy, timeout and abort errors name the holder', async () => {
  const target = join(scratch(), 'db');
  const holder = startGroup(holdBin, ['run', target, '-c', 'echo held; sleep 600']);
  try {
    assert.equal(await holder.line(), 'held');
    const check = (err, code) => {
      assert.ok(err instanceof HoldError, String(err));
      assert.equal(err.code, code);
      assert.equal(err.holder.pid, holder.pid);
      assert.equal(err.holder.alive, true); // a boolean, not the word
      assert.match(err.message, new RegExp(`pid ${holder.pid}\\b`));
      assert.match(err.message, /hold run/);
      return true;
    };
    await assert.rejects(tryLock(target), (e) => check(e, 'EBUSY'));
    await assert.rejects(lock(target, { wait: 0 }), (e) => check(e, 'EBUSY'));
    await assert.rejects(lock(target, { wait: 0.3 }), (e) => check(e, 'ETIMEDOUT'));
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 200);
    await assert.rejects(lock(target, { signal: ac.signal }), (e) => check(e, 'EABORT'));
    await assert.rejects(lock(target, { signal: AbortSignal.abort() }), { code: 'EABORT' });
    await assert.rejects(update(target, (o) => o, { wait: 0.2 }), (e) => check(e, 'ETIMEDOUT'));
    await assert.rejects(append(target, 'x', { wait: 0 }), (e) => check(e, 'EBUSY'));
  } finally {
    // A failure must not leave the holder, which would keep this file's
    // process (and the test run) waiting for it.
    holder.killGroup();
  }
  await holder.exited;
});

test('bad targets, names and options get EINVAL with a clear message', async () => {
  const dir = scratch();
  mkdirSync(join(dir, 'sub'));
  const cases = [
    [() => lock(undefined), /no TARGET/],
    [() => lock(42), /target must be a string/],
    [() => lock(undefined, { name: 'Bad/Name' }), /invalid lock name/],
    [() => lock(undefined, { name: 'x'.repeat(100) }), /invalid lock name/],
    [() => lock('t', { wait: -1 }), /wait must be a number/],
    [() => lock('t', { wait: '3' }), /wait must be a number/],
    [() => lock('t', { timeout: 3 }), /unknown option "timeout"/],
    [() => lock('t', { protocol: 'carrier-pigeon' }), /unknown protocol/],
    [() => lock(undefined, { name: 'a', lockFile: 'b' }), /exclude each other/],
    [() => lock('t', { shared: 'yes' }), /shared must be true or false/],
    [() => lock('t', { fields: 'job=x' }), /fields must be an object/],
    [() => lock('t', { settings: { colour: 'red' } }), /unknown setting/],
    [() => lock('t', { signal: {} }), /AbortSignal/],
    [() => lock('ftp://host/x'), /unknown address scheme/],
    [() => update(join(dir, 'f'), 'not a function'), /function/],
    [() => update(join(dir, 'f'), (o) => o, { encoding: 'latin1' }), /encoding/],
    [() => append(join(dir, 'f'), 42), /data must be/],
    [() => withLock('t'), /function/],
    [() => update(join(dir, 'f'), (o) => o, { shared: true }), /option "shared" does not apply: update and append need the file's lock alone/],
    [() => update(join(dir, 'f'), (o) => o, { slots: 4 }), /option "slots" does not apply: update and append need the file's lock alone/],
    [() => update(join(dir, 'f'), (o) => o, { slots: 1 }), /option "slots" does not apply/],
    [() => append(join(dir, 'f'), 'x', { shared: true }), /option "shared" does not apply/],
    [() => append(join(dir, 'f'), 'x', { slots: 2 }), /option "slots" does not apply/],
    [() => lock('t', { mustExist: true }), /unknown option "mustExist"/],
    [() => update(join(dir, 'f'), (o) => o, { allowSplit: 'yes' }), /allowSplit must be true or false/],
    [() => update(join(dir, 'f'), (o) => o, { allowOwnerChange: 1 }), /allowOwnerChange must be true or false/],
    [() => update(join(dir, 'f'), (o) => o, { allowEmpty: 'no' }), /allowEmpty must be true or false/],
    [() => append(join(dir, 'f'), 'x', { allowSplit: true }), /unknown option "allowSplit"/],
    [() => lock('t', { deadlockAfter: -1 }), /deadlockAfter must be a number of seconds >= 0/],
    [() => lock('t', { deadlockAfter: '1' }), /deadlockAfter must be a number of seconds >= 0/],
    [() => lock('t', { heldBy: 'a' }), /heldBy must be an array of the locks/],
    [() => lock('t', { heldBy: [{}] }), /heldBy must be an array of the locks/],
  ];
  for (const [call, message] of cases) {
    await assert.rejects(call(), (err) => {
      assert.ok(err instanceof HoldError, `${call}: ${err}`);
      assert.equal(err.code, 'EINVAL', `${call}: ${err.message}`);
      assert.match(err.message, message);
      return true;
    });
  }
});

test('a missing directory is an error naming makeDirs, which makes it', async () => {
  const dir = join(scratch(), 'data', 'deep');
  await assert.rejects(lock(join(dir, 'tracker.md')), (err) => err.code === 'ENOENT' && /makeDirs/.test(err.message));
  await assert.rejects(tryLock(join(dir, 'tracker.md')), { code: 'ENOENT' });
  assert.equal(existsSync(dir), false);
  await assert.rejects(lock(join(dir, 'tracker.md'), { makeDirs: 'yes' }), { code: 'EINVAL' });
  const l = await lock(join(dir, 'tracker.md'), { makeDirs: true });
  assert.equal(l.path, join(dir, 'tracker.md.lock'));
  await l.release();
  await withLock(join(scratch(), 'other', 'x'), async () => {}, { makeDirs: true });
  assert.equal(existsSync(join(dir, 'tracker.md.lock')), true);
});

test('withLock and update with the options before the function say the order they take', async () => {
  // Issue 59: withLock(t, {timeout}, fn) failed with "needs a function".
  const target = join(scratch(), 't');
  await assert.rejects(withLock(target, { timeout: 1 }, async () => 1),
    (err) => err.code === 'EINVAL' && /withLock\(target, fn, opts\)/.test(err.message) && /options there and the function third/.test(err.message));
  await assert.rejects(update(target, { encoding: 'utf8' }, (s) => s),
    (err) => err.code === 'EINVAL' && /update\(file, fn, opts\)/.test(err.message));
  await assert.rejects(withLock(target), (err) => err.code === 'EINVAL' && /got undefined/.test(err.message));
});
