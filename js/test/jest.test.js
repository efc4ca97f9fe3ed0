// The package loads under Jest before 27, whose resolver knows no 'node:'
// module names: Jest 24, installed in test/jest24 (.ci/run does), runs
// test/jest24/*.spec.js: load.spec.js, and held-lock.spec.js, which reads
// every property of a held lock in an environment without AbortController.

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';

import { start } from './helpers.js';

const dir = fileURLToPath(new URL('./jest24/', import.meta.url));
const jest = `${dir}node_modules/jest/bin/jest.js`;
const missing = !existsSync(jest) && 'Jest 24 is not installed in test/jest24 (.ci/run installs it: npm install --prefix js/test/jest24 jest@24.9.0)';

test('the package loads and works under Jest 24', { skip: process.env.HOLD_TEST_NOSKIP !== '1' && missing }, async () => {
  assert.ok(!missing, missing);
  const r = await start(process.execPath, [jest, '--ci', '--rootDir', dir], { cwd: dir }).exited;
  assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
});
