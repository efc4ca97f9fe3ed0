// The ES module entry of @hold-dev/hold/proper-lockfile: proper-lockfile's
// API on hold, written once in proper-lockfile.cjs and re-exported here,
// so that import and require share one set of locks.

import lockfile from './proper-lockfile.cjs';

export const { lock, unlock, check, lockSync, unlockSync, checkSync, getLocks } = lockfile;
export default lockfile;
