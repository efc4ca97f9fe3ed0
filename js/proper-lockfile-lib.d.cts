// Types of @hold-dev/hold/proper-lockfile/lib/lockfile (proper-lockfile's
// lib/lockfile, with node-style callbacks), for require().

import lockfile = require('./proper-lockfile.cjs');

/** The function lock() calls back with: releases the lock, then calls done. */
type Release = (done?: (err: Error | null) => void) => void;

/** Takes the lock of file; calls back with the function that releases it. */
export function lock(file: string, callback: (err: Error | null, release?: Release) => void): void;
export function lock(file: string, options: lockfile.LockOptions | undefined, callback: (err: Error | null, release?: Release) => void): void;
/** Releases the lock of file that this process holds. */
export function unlock(file: string, callback: (err: Error | null) => void): void;
export function unlock(file: string, options: lockfile.UnlockOptions | undefined, callback: (err: Error | null) => void): void;
/** Calls back with whether file is locked. */
export function check(file: string, callback: (err: Error | null, isLocked?: boolean) => void): void;
export function check(file: string, options: lockfile.CheckOptions | undefined, callback: (err: Error | null, isLocked?: boolean) => void): void;
/** The locks this process holds, by canonical file path. */
export const getLocks: typeof lockfile.getLocks;
