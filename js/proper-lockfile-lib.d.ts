// Types of @hold-dev/hold/proper-lockfile/lib/lockfile for import: those
// of proper-lockfile-lib.d.cts, which proper-lockfile-lib.js re-exports.
import lib = require('./proper-lockfile-lib.cjs');

export declare const lock: typeof lib.lock;
export declare const unlock: typeof lib.unlock;
export declare const check: typeof lib.check;
export declare const getLocks: typeof lib.getLocks;
declare const _default: typeof lib;
export default _default;
