// Run by Jest 24 (see ../jest.test.js): the package loads under a Jest
// before 27, whose resolver knows no 'node:' module names, and works there.

const path = require('path');
const fs = require('fs');
const os = require('os');

const hold = require('../../index.cjs');

test('the package loads under Jest 24 and takes a lock', async () => {
  for (const name of ['lock', 'tryLock', 'withLock', 'update', 'append', 'status',
    'lockSync', 'tryLockSync', 'withLockSync', 'updateSync', 'appendSync', 'statusSync']) {
    expect(typeof hold[name]).toBe('function');
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hold-jest-'));
  const target = path.join(dir, 't');
  const l = hold.lockSync(target);
  expect(() => hold.tryLockSync(target)).toThrow(/busy/);
  l.releaseSync();
  const a = await hold.lock(target);
  await a.release();
  fs.rmSync(dir, { recursive: true, force: true });
});
