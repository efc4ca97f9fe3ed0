// Types of @hold-dev/hold/proper-lockfile for import: those of
// proper-lockfile.d.cts, which proper-lockfile.js re-exports.
import * as lockfile from './proper-lockfile.cjs';
export * from './proper-lockfile.cjs';
export default lockfile;
