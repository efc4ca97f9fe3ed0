// The ES module entry of @hold-dev/hold. The package is written once, as
// CommonJS in index.cjs, and this file re-exports it: a program (or its
// dependencies) may both import and require the package and still get one
// agent, one set of locks and one HoldError class.

import hold from './index.cjs';

export const {
  HoldError, lock, tryLock, withLock, update, append, status,
  lockSync, tryLockSync, withLockSync, updateSync, appendSync, statusSync,
} = hold;
