// The ES module entry of @hold-dev/hold/proper-lockfile/lib/lockfile,
// re-exporting proper-lockfile-lib.cjs so that import and require share
// one set of locks.

import lib from './proper-lockfile-lib.cjs';

export const { lock, unlock, check, getLocks } = lib;
export default lib;
