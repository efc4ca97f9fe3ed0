// The real proper-lockfile 4.1.2, for the tests that compare the drop-in
// with it: .ci/run installs it for internal/dirlock's interop tests.

import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

import { repoRoot } from './helpers.js';

/** Where it is installed. */
export const realDir = join(repoRoot, 'internal/dirlock/testdata/node/node_modules/proper-lockfile');

/** Why it cannot be used (false when it can). */
export const realMissing = !existsSync(join(realDir, 'package.json'))
  && 'proper-lockfile is not installed (.ci/run installs it: npm install --no-save --prefix internal/dirlock/testdata/node proper-lockfile@4.1.2)';

/** Whether tests that need it skip: only when it is missing and HOLD_TEST_NOSKIP is not 1. */
export const skipReal = process.env.HOLD_TEST_NOSKIP !== '1' && realMissing;

/** Loads it. */
export function loadReal() {
  return createRequire(import.meta.url)(realDir);
}
