// @hold-dev/hold/proper-lockfile beyond what proper-lockfile itself does
// (proper-lockfile-compat.test.js runs the shared behaviour against both):
// it excludes the real proper-lockfile across processes, both ways; a
// crash releases at once; errors name a hold holder; a lock taken over or
// removed is reported through onCompromised with proper-lockfile's
// errors, and the default onCompromised throws, as proper-lockfile's does.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { realpathSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { test } from 'node:test';

import * as hold from '@hold-dev/hold';
import lockfile, { check, checkSync, getLocks, lock, lockSync, unlock, unlockSync } from '@hold-dev/hold/proper-lockfile';
import { hangLimit, repoRoot, scratch, start } from './helpers.js';
import { loadReal, realDir, skipReal } from './proper-lockfile-real.js';

const dropIn = join(repoRoot, 'js', 'proper-lockfile.cjs');

/** A file to lock. */
function target() {
  const file = join(realpathSync(scratch()), 'file');
  writeFileSync(file, '');
  return file;
}

/** Resolves once cond() holds, polling; rejects after hangLimit. */
async function until(cond, what) {
  const deadline = Date.now() + hangLimit;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${hangLimit} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * A Node process that locks file with the module at modulePath, prints
 * "locked", and on a line on its stdin releases, tries to lock it once
 * more and prints that attempt's outcome ("locked again" or the code).
 */
function holder(modulePath, file) {
  const script = `
    const lockfile = require(${JSON.stringify(modulePath)});
    const file = ${JSON.stringify(file)};
    (async () => {
      const release = await lockfile.lock(file);
      console.log('locked');
      process.stdin.once('data', async () => {
        await release();
        console.log('released');
        process.stdin.once('data', async () => {
          try {
            const r = await lockfile.lock(file);
            console.log('locked again');
            await r();
          } catch (err) {
            console.log(err.code);
          }
          process.exit(0);
        });
      });
    })();
  `;
  return start(process.execPath, ['-e', script], { stdio: ['pipe', 'pipe', 'pipe'] });
}

test('the drop-in\'s entry points are proper-lockfile\'s, from import as from require', () => {
  assert.equal(typeof lockfile, 'function');
  assert.equal(lockfile.lock, lock);
  for (const [name, fn] of Object.entries({ check, checkSync, getLocks, lockSync, unlock, unlockSync })) assert.equal(lockfile[name], fn, name);
});

test('the drop-in and the real proper-lockfile, in other processes, exclude each other both ways', { skip: skipReal }, async () => {
  assert.ok(!skipReal, skipReal);
  const real = loadReal();
  for (const [other, here] of [[realDir, lockfile], [dropIn, real]]) {
    const file = target();
    const child = holder(other, file);
    assert.equal(await child.line(), 'locked');
    await assert.rejects(here.lock(file), { code: 'ELOCKED', message: 'Lock file is already being held' });
    assert.equal(await here.check(file), true);
    child.stdin.write('\n');
    assert.equal(await child.line(), 'released');
    const release = await here.lock(file);
    child.stdin.write('\n');
    assert.equal(await child.line(), 'ELOCKED', `${other} took the lock ${here === real ? 'the real proper-lockfile' : 'the drop-in'} holds`);
    await release();
    assert.equal((await child.exited).code, 0);
  }
});

test('check() asks the agent, which judges a real proper-lockfile holder by the caller\'s stale, as proper-lockfile does', { skip: skipReal }, async () => {
  assert.ok(!skipReal, skipReal);
  const real = loadReal();
  const file = target();
  // A live proper-lockfile holder in another process that does not
  // refresh its time stamp during the test (update: half an hour).
  const child = start(process.execPath, ['-e', `
    require(${JSON.stringify(realDir)}).lock(${JSON.stringify(file)}, { stale: 3600000, update: 1800000 })
      .then(() => console.log('locked'));
    process.stdin.once('data', () => process.exit(0));
  `], { stdio: ['pipe', 'pipe', 'pipe'] });
  try {
    assert.equal(await child.line(), 'locked');
    const { utimesSync } = await import('node:fs');
    const old = new Date(Date.now() - 60_000);
    utimesSync(`${file}.lock`, old, old);
    const where = { lockFile: `${file}.lock`, protocol: 'dir' };
    // The library's verdict, by the stale time the request carries.
    assert.equal((await hold.status(undefined, { ...where, stale: 5 })).state, 'stale');
    assert.equal((await hold.status(undefined, { ...where, stale: 120 })).state, 'held exclusive');
    assert.equal(hold.statusSync(undefined, { ...where, stale: 5 }).state, 'stale');
    for (const stale of [5000, 120_000]) {
      const want = await real.check(file, { stale });
      assert.equal(want, stale > 60_000);
      assert.equal(await check(file, { stale }), want, `check with stale ${stale}`);
      assert.equal(checkSync(file, { stale }), want, `checkSync with stale ${stale}`);
    }
  } finally {
    child.stdin.write('\n');
    await child.exited;
  }
});

test('getLocks() lists the locks held, keyed and described as proper-lockfile\'s lib/lockfile lists them', { skip: skipReal }, async () => {
  assert.ok(!skipReal, skipReal);
  const realLib = createRequire(import.meta.url)(join(realDir, 'lib', 'lockfile.js'));
  const realPromise = loadReal();
  const [a, b, c] = [target(), target(), target()];
  const releaseA = await lock(a, { stale: 20_000 });
  const releaseB = lockSync(b, { lockfilePath: `${b}.other` });
  const releaseC = await realPromise.lock(c);
  try {
    const held = getLocks();
    assert.deepEqual(Object.keys(held).sort(), [a, b].sort());
    assert.equal(held[a].lockfilePath, `${a}.lock`);
    assert.equal(held[b].lockfilePath, `${b}.other`);
    assert.equal(held[a].options.stale, 20_000);
    assert.equal(held[a].options.update, 10_000);
    const real = realLib.getLocks()[c];
    for (const l of [held[a], held[b]]) {
      // The properties proper-lockfile's entries have, of the same types.
      for (const key of ['lockfilePath', 'mtime', 'mtimePrecision', 'options', 'lastUpdate']) {
        assert.equal(typeof l[key], typeof real[key], key);
      }
      assert.ok(l.mtime instanceof Date);
      assert.equal(l.lastUpdate, l.mtime.getTime());
      assert.equal(l.released, false);
    }
    await releaseA();
    assert.deepEqual(Object.keys(getLocks()), [b]);
    assert.equal(held[a].lockfilePath, `${a}.lock`, 'a snapshot: the object returned earlier is unchanged');
  } finally {
    if (getLocks()[a]) await releaseA();
    releaseB();
    await releaseC();
  }
  assert.deepEqual(getLocks(), {});
});

test('a holder that is killed releases at once, not once its lock is stale', { skip: skipReal }, async () => {
  assert.ok(!skipReal, skipReal);
  const file = target();
  const child = holder(dropIn, file);
  assert.equal(await child.line(), 'locked');
  assert.ok(existsSync(`${file}.lock`));
  child.kill('SIGKILL');
  await child.exited;
  // Its agent sees its stdin end and removes the lock directory; a stale
  // time of an hour rules out that anything else frees it.
  const real = loadReal();
  await until(async () => !(await real.check(file, { stale: 3_600_000 })), 'the killed holder\'s lock was not released');
  const release = await real.lock(file, { stale: 3_600_000 });
  await release();
});

test('ELOCKED names the holder when hold knows it', async () => {
  const file = target();
  const child = holder(dropIn, file);
  assert.equal(await child.line(), 'locked');
  await assert.rejects(lock(file), (err) => {
    assert.equal(err.code, 'ELOCKED');
    assert.equal(err.file, file);
    assert.equal(typeof err.holder?.pid, 'number');
    return true;
  });
  assert.throws(() => lockSync(file), { code: 'ELOCKED' });
  child.kill('SIGKILL');
  await child.exited;
});

test('a lock taken over is compromised: "Unable to update lock within the stale threshold"', async () => {
  const file = target();
  let compromised;
  const called = new Promise((resolve) => { compromised = resolve; });
  const release = await lock(file, { onCompromised: compromised });
  // Another's lock directory, empty as proper-lockfile's, in its place.
  rmSync(`${file}.lock`, { recursive: true });
  mkdirSync(`${file}.lock`);
  const guard = setTimeout(() => compromised(new Error('onCompromised was not called')), hangLimit);
  const err = await called;
  clearTimeout(guard);
  assert.equal(err.code, 'ECOMPROMISED');
  assert.equal(err.message, 'Unable to update lock within the stale threshold');
  assert.equal(err.cause?.code, 'ELOST');
  await assert.rejects(release(), { code: 'ERELEASED' });
  assert.ok(existsSync(`${file}.lock`), 'the other\'s lock directory was removed');
  await assert.rejects(unlock(file), { code: 'ENOTACQUIRED' });
});

test('the default onCompromised throws, as proper-lockfile\'s does', async () => {
  const file = target();
  const script = `
    const lockfile = require(${JSON.stringify(dropIn)});
    lockfile.lock(${JSON.stringify(file)}).then(() => {
      require('fs').rmSync(${JSON.stringify(file + '.lock')}, { recursive: true });
      setTimeout(() => {}, ${hangLimit});
    });
  `;
  const r = await start(process.execPath, ['-e', script]).exited;
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /ECOMPROMISED/);
});

test('the fs option is used for realpath', async () => {
  const file = target();
  const calls = [];
  const fs = {
    realpath: (p, cb) => { calls.push(p); cb(null, file); },
    realpathSync: (p) => { calls.push(p); return file; },
  };
  const release = await lock('alias', { fs });
  assert.equal(await check('alias', { fs }), true);
  assert.equal(checkSync('alias', { fs }), true);
  await release();
  lockSync('alias', { fs });
  unlockSync('alias', { fs });
  assert.deepEqual(calls, ['alias', 'alias', 'alias', 'alias', 'alias']);
  assert.equal(existsSync(`${file}.lock`), false);
});

test('a relative lockfilePath is this process\'s, after a chdir too', async () => {
  const file = target();
  const dir = join(file, '..');
  const cwd = process.cwd();
  // The agent starts (if it has not yet) in one directory...
  await (await lock(file))();
  process.chdir(dir);
  try {
    // ...and the lock is made relative to this process's current one.
    const release = await lock(file, { lockfilePath: 'relative.lock' });
    assert.ok(existsSync(join(dir, 'relative.lock')));
    assert.equal(await check(file, { lockfilePath: 'relative.lock' }), true);
    await release();
    assert.equal(existsSync(join(dir, 'relative.lock')), false);
  } finally {
    process.chdir(cwd);
  }
});

test('check() trusts hold\'s answer about a live holder over an old time stamp', async () => {
  const file = target();
  const release = await lock(file, { stale: 5000, update: 60_000 });
  try {
    // An old time stamp: proper-lockfile would call the lock stale, but
    // its holder is this process, alive, and hold says so.
    const { utimesSync } = await import('node:fs');
    const old = new Date(Date.now() - 3_600_000);
    utimesSync(`${file}.lock`, old, old);
    assert.equal(await check(file, { stale: 5000 }), true);
  } finally {
    await release();
  }
});

test('a time stamp someone else sets is a compromise, as proper-lockfile\'s "mtime is not ours"', async () => {
  const file = target();
  let compromised;
  const called = new Promise((resolve) => { compromised = resolve; });
  await lock(file, { update: 1000, stale: 2000, onCompromised: compromised });
  const past = new Date(Date.now() - 60000);
  utimesSync(`${file}.lock`, past, past);
  const guard = setTimeout(() => compromised(new Error('onCompromised was not called')), hangLimit);
  const err = await called;
  clearTimeout(guard);
  assert.equal(err.code, 'ECOMPROMISED');
  assert.equal(err.message, 'Unable to update lock within the stale threshold');
  await assert.rejects(unlock(file), { code: 'ENOTACQUIRED' });
});

test('update sets how often the time stamp is refreshed, as proper-lockfile\'s timer does', async () => {
  const file = target();
  // stale 5000 caps update 6000 at 2500 ms: the stamp stays as made for
  // longer than the agent's default second, then moves.
  const release = await lock(file, { update: 6000, stale: 5000 });
  const made = statSync(`${file}.lock`).mtimeMs;
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(statSync(`${file}.lock`).mtimeMs, made, 'refreshed before update (2500 ms) was due');
  await until(() => statSync(`${file}.lock`).mtimeMs > made, 'the refresh at 2500 ms');
  await release();
});

test('@hold-dev/hold/proper-lockfile/lib/lockfile is proper-lockfile\'s lib/lockfile, on the drop-in\'s locks', async () => {
  const require = createRequire(import.meta.url);
  const lib = require('@hold-dev/hold/proper-lockfile/lib/lockfile');
  const libEsm = await import('@hold-dev/hold/proper-lockfile/lib/lockfile');
  assert.equal(libEsm.getLocks, lib.getLocks);
  assert.equal(lib.getLocks, getLocks);
  const file = target();
  const release = await new Promise((resolve, reject) => lib.lock(file, {}, (err, r) => (err ? reject(err) : resolve(r))));
  assert.deepEqual(Object.keys(getLocks()).filter((k) => k === file), [file], 'a lock taken through lib is the drop-in\'s');
  assert.equal(await new Promise((resolve, reject) => lib.check(file, (err, v) => (err ? reject(err) : resolve(v)))), true);
  await new Promise((resolve, reject) => release((err) => (err ? reject(err) : resolve())));
  assert.ok(!(file in getLocks()));
  const again = await lock(file);
  await new Promise((resolve, reject) => lib.unlock(file, (err) => (err ? reject(err) : resolve())));
  await assert.rejects(again(), { code: 'ERELEASED' });
  await new Promise((resolve) => lib.unlock(file, (err) => {
    assert.equal(err?.code, 'ENOTACQUIRED');
    resolve();
  }));
});
