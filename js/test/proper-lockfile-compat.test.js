// A project's own tests, written for proper-lockfile (its README's usage:
// lock and release, check, stale, retries, onCompromised, lockSync), run
// unchanged against the real proper-lockfile 4.1.2 and against
// @hold-dev/hold/proper-lockfile: the import is the only parameter. The
// real package is the one .ci/run installs for internal/dirlock's interop
// tests.

import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, test } from 'node:test';

import { hangLimit, scratch } from './helpers.js';
import { loadReal, skipReal } from './proper-lockfile-real.js';

const require = createRequire(import.meta.url);

const implementations = [
  ['proper-lockfile', loadReal, skipReal],
  ['@hold-dev/hold/proper-lockfile', () => require('@hold-dev/hold/proper-lockfile'), false],
];

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A file to lock, in a directory of its own. */
function target() {
  const dir = scratch();
  const file = join(dir, 'some', 'file.json');
  mkdirSync(join(dir, 'some'));
  writeFileSync(file, '{}');
  return { dir, file };
}

for (const [name, load, skip] of implementations) {
  describe(`a project's proper-lockfile tests, against ${name}`, { skip }, () => {
    test('lock, then release through the function lock() resolves to', async () => {
      assert.ok(!skip, skip);
      const lockfile = load();
      const { file } = target();
      const release = await lockfile.lock(file);
      assert.ok(existsSync(`${file}.lock`), 'no lock directory while held');
      assert.equal(await lockfile.check(file), true);
      await release();
      assert.equal(existsSync(`${file}.lock`), false, 'the lock directory outlived the release');
      assert.equal(await lockfile.check(file), false);
    });

    test('a second lock of a held file fails with ELOCKED', async () => {
      const lockfile = load();
      const { file } = target();
      const release = await lockfile.lock(file);
      await assert.rejects(lockfile.lock(file), (err) => {
        assert.equal(err.code, 'ELOCKED');
        assert.equal(err.message, 'Lock file is already being held');
        assert.equal(err.file, file);
        return true;
      });
      await release();
    });

    test('releasing twice fails with ERELEASED; unlocking what is not held, with ENOTACQUIRED', async () => {
      const lockfile = load();
      const { file } = target();
      const release = await lockfile.lock(file);
      await release();
      await assert.rejects(release(), { code: 'ERELEASED', message: 'Lock is already released' });
      await assert.rejects(lockfile.unlock(file), { code: 'ENOTACQUIRED', message: 'Lock is not acquired/owned by you' });
    });

    test('unlock() releases a lock too', async () => {
      const lockfile = load();
      const { file } = target();
      await lockfile.lock(file);
      await lockfile.unlock(file);
      assert.equal(await lockfile.check(file), false);
      const release = await lockfile.lock(file);
      await release();
    });

    test('realpath: a missing file fails with ENOENT, unless realpath is false', async () => {
      const lockfile = load();
      const { dir, file } = target();
      const missing = join(dir, 'missing.json');
      await assert.rejects(lockfile.lock(missing), { code: 'ENOENT' });
      await assert.rejects(lockfile.check(missing), { code: 'ENOENT' });
      const release = await lockfile.lock(missing, { realpath: false });
      assert.ok(existsSync(`${missing}.lock`));
      await release();
      // Through a symbolic link, the lock is the real file's.
      const link = join(dir, 'link.json');
      symlinkSync(file, link);
      const r = await lockfile.lock(link);
      assert.ok(existsSync(`${file}.lock`));
      await assert.rejects(lockfile.lock(file), { code: 'ELOCKED' });
      await r();
    });

    test('lockfilePath puts the lock where it says', async () => {
      const lockfile = load();
      const { dir, file } = target();
      const lockfilePath = join(dir, 'elsewhere.lock');
      const release = await lockfile.lock(file, { lockfilePath });
      assert.ok(existsSync(lockfilePath));
      assert.equal(existsSync(`${file}.lock`), false);
      assert.equal(await lockfile.check(file, { lockfilePath }), true);
      assert.equal(await lockfile.check(file), false);
      await release();
      assert.equal(existsSync(lockfilePath), false);
    });

    test('retries: a lock released meanwhile is taken; one that is not fails with ELOCKED', async () => {
      const lockfile = load();
      const { file } = target();
      const release = await lockfile.lock(file);
      await assert.rejects(lockfile.lock(file, { retries: { retries: 2, minTimeout: 20, maxTimeout: 40 } }), { code: 'ELOCKED' });
      const waiting = lockfile.lock(file, { retries: { retries: 1000, factor: 1, minTimeout: 20, maxTimeout: 50 } });
      await sleep(100);
      await release();
      const r = await waiting;
      await r();
    });

    test('stale: an abandoned lock directory older than stale is taken over, and check calls it free', async () => {
      const lockfile = load();
      const { file } = target();
      // What a holder that crashed leaves: the directory, with an old time stamp.
      mkdirSync(`${file}.lock`);
      const old = new Date(Date.now() - 60_000);
      utimesSync(`${file}.lock`, old, old);
      assert.equal(await lockfile.check(file, { stale: 5000 }), false);
      assert.equal(await lockfile.check(file, { stale: 120_000 }), true);
      await assert.rejects(lockfile.lock(file, { stale: 120_000 }), { code: 'ELOCKED' });
      const release = await lockfile.lock(file, { stale: 5000 });
      assert.equal(await lockfile.check(file, { stale: 5000 }), true);
      await release();
    });

    test('onCompromised is called with ECOMPROMISED when the lock directory is removed', async () => {
      const lockfile = load();
      const { file } = target();
      let compromised;
      const called = new Promise((resolve) => { compromised = resolve; });
      const release = await lockfile.lock(file, { stale: 2000, update: 1000, onCompromised: compromised });
      rmSync(`${file}.lock`, { recursive: true });
      // Both keep no timer referenced (neither keeps a process alive): this
      // one keeps the test's alive while it waits, and bounds the wait.
      const guard = setTimeout(() => compromised(new Error('onCompromised was not called')), hangLimit);
      const err = await called;
      clearTimeout(guard);
      assert.equal(err.code, 'ECOMPROMISED');
      await assert.rejects(release(), { code: 'ERELEASED' });
      // The file can be locked again.
      const r = await lockfile.lock(file);
      await r();
    });

    test('lockSync, checkSync and unlockSync', () => {
      const lockfile = load();
      const { file } = target();
      const release = lockfile.lockSync(file);
      assert.equal(lockfile.checkSync(file), true);
      assert.throws(() => lockfile.lockSync(file), { code: 'ELOCKED', message: 'Lock file is already being held' });
      release();
      assert.throws(() => release(), { code: 'ERELEASED' });
      assert.equal(lockfile.checkSync(file), false);
      lockfile.lockSync(file);
      lockfile.unlockSync(file);
      assert.throws(() => lockfile.unlockSync(file), { code: 'ENOTACQUIRED' });
      assert.throws(() => lockfile.lockSync(file, { retries: 3 }), { code: 'ESYNC', message: 'Cannot use retries with the sync api' });
    });

    test('the default export is lock()', async () => {
      const lockfile = load();
      const { file } = target();
      const release = await lockfile(file);
      await release();
    });
  });
}
