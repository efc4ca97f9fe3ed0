// Run by Jest 24 (see ../jest.test.js), whose node environment has no
// AbortController or AbortSignal: every property of a held lock reads
// without a ReferenceError, its signal works as an AbortSignal would, and
// the proper-lockfile drop-in, which watches that signal, works there.

const path = require('path');
const fs = require('fs');
const os = require('os');

const hold = require('../../index.cjs');
const lockfile = require('../../proper-lockfile.cjs');

function scratch() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'hold-jest-'));
}

test('this environment lacks AbortController, as Jest before 26 does', () => {
  expect(typeof AbortController).toBe('undefined');
  expect(typeof AbortSignal).toBe('undefined');
});

test('every property of a held lock reads, and its signal aborts when the lock is lost', async () => {
  const dir = scratch();
  const target = path.join(dir, 't');
  const l = await hold.lock(target, { protocol: 'dir' });
  const props = new Set();
  for (let o = l; o && o !== Object.prototype; o = Object.getPrototypeOf(o)) {
    for (const name of Object.getOwnPropertyNames(o)) props.add(name);
  }
  for (const name of props) {
    if (name === 'constructor') continue;
    expect(() => l[name]).not.toThrow();
  }
  expect(typeof l.token).toBe('number');
  expect(l.path).toBe(`${target}.lock`);
  expect(l.protocol).toBe('dir');
  expect(l.owner.pid).toBeGreaterThan(0);
  const { signal } = l;
  expect(signal).toBe(l.signal);
  expect(signal.aborted).toBe(false);
  expect(signal.reason).toBeUndefined();
  expect(() => signal.throwIfAborted()).not.toThrow();
  await l.check();
  l.checkSync();

  // The signal is accepted where an AbortSignal is, and its abort
  // cancels a wait: losing l (its directory removed) ends the wait below.
  const waiter = await hold.lock(path.join(dir, 'other'));
  const waiting = hold.lock(path.join(dir, 'other'), { signal });
  let onabort = 0;
  signal.onabort = () => { onabort++; };
  const aborted = new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
  fs.rmSync(l.path, { recursive: true });
  const event = await aborted;
  expect(event.type).toBe('abort');
  expect(signal.aborted).toBe(true);
  expect(signal.reason.code).toBe('ELOST');
  expect(onabort).toBe(1);
  expect(() => signal.throwIfAborted()).toThrow(signal.reason);
  await expect(waiting).rejects.toMatchObject({ code: 'EABORT' });
  await expect(l.release()).rejects.toMatchObject({ code: 'ELOST' });
  await waiter.release();
  fs.rmSync(dir, { recursive: true, force: true });
}, 60000);

test('a signal option that is not an AbortSignal is refused', async () => {
  await expect(hold.lock(path.join(scratch(), 't'), { signal: {} })).rejects.toMatchObject({ code: 'EINVAL' });
});

test('the proper-lockfile drop-in works, onCompromised included', async () => {
  const dir = scratch();
  const file = path.join(dir, 'f');
  fs.writeFileSync(file, '');
  const release = await lockfile.lock(file);
  expect(await lockfile.check(file)).toBe(true);
  await expect(lockfile.lock(file)).rejects.toMatchObject({ code: 'ELOCKED' });
  await release();
  await expect(release()).rejects.toMatchObject({ code: 'ERELEASED' });
  const compromised = new Promise((resolve) => {
    lockfile.lock(file, { onCompromised: resolve }).then(() => fs.rmSync(`${file}.lock`, { recursive: true }));
  });
  expect((await compromised).code).toBe('ECOMPROMISED');
  const releaseSync = lockfile.lockSync(file);
  expect(lockfile.checkSync(file)).toBe(true);
  releaseSync();
  fs.rmSync(dir, { recursive: true, force: true });
}, 60000);

test('a kernel lock, released ahead of its reply, is free again at once', async () => {
  // The release ahead reads the monotonic clock (process.hrtime) and
  // watches the exit (process.on): both as Jest's environment has them.
  const dir = scratch();
  const target = path.join(dir, 't');
  for (let i = 0; i < 3; i++) {
    const l = await hold.lock(target);
    expect(l.protocol).toBe('flock');
    await l.release();
    const s = hold.lockSync(target);
    s.releaseSync();
  }
  expect((await hold.status(target)).state).toBe('free');
  fs.rmSync(dir, { recursive: true, force: true });
}, 60000);
