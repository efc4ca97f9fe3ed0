// Types of @hold-dev/hold/proper-lockfile for import: those of
// proper-lockfile.d.cts, as proper-lockfile.js re-exports
// proper-lockfile.cjs: lock() as the default export, and each function by
// name.
import lockfile = require('./proper-lockfile.cjs');

export type RetryOptions = lockfile.RetryOptions;
export type LockOptions = lockfile.LockOptions;
export type UnlockOptions = lockfile.UnlockOptions;
export type CheckOptions = lockfile.CheckOptions;
export type HeldLock = lockfile.HeldLock;
export declare const lock: typeof lockfile.lock;
export declare const unlock: typeof lockfile.unlock;
export declare const check: typeof lockfile.check;
export declare const lockSync: typeof lockfile.lockSync;
export declare const unlockSync: typeof lockfile.unlockSync;
export declare const checkSync: typeof lockfile.checkSync;
export declare const getLocks: typeof lockfile.getLocks;
export default lockfile;
