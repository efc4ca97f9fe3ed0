// js/README.md's "Coming from proper-lockfile": its before and after
// examples differ in the import alone, and both run as written, the first
// with the real proper-lockfile, the second with the drop-in, printing the
// same.

import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { repoRoot, scratch, start } from './helpers.js';
import { realDir, skipReal as skip } from './proper-lockfile-real.js';

/** The section's ```js blocks that name their file, by name. */
function examples() {
  const readme = readFileSync(join(repoRoot, 'js', 'README.md'), 'utf8');
  const startAt = readme.indexOf('\n## Coming from proper-lockfile\n');
  assert.ok(startAt >= 0, 'js/README.md has no "Coming from proper-lockfile" section');
  const end = readme.indexOf('\n## ', startAt + 1);
  const section = readme.slice(startAt, end < 0 ? undefined : end);
  const out = {};
  for (const [, code] of section.matchAll(/\n```js\n([\s\S]*?)\n```\n/g)) {
    const name = /^\/\/ ([\w.-]+\.[cm]?js)\n/.exec(code)?.[1];
    if (name) out[name] = code + '\n';
  }
  return out;
}

test('the README\'s proper-lockfile before and after differ in the import alone and print the same', { skip }, async () => {
  assert.ok(!skip, skip);
  const ex = examples();
  assert.deepEqual(Object.keys(ex).sort(), ['after.js', 'before.js']);
  const before = ex['before.js'].split('\n').slice(1);
  const after = ex['after.js'].split('\n').slice(1);
  assert.equal(before.length, after.length);
  const changed = before.map((line, i) => [line, after[i]]).filter(([a, b]) => a !== b);
  assert.deepEqual(changed, [["const lockfile = require('proper-lockfile');", "const lockfile = require('@hold-dev/hold/proper-lockfile');"]]);

  // A project with both packages installed (as links).
  const dir = scratch();
  mkdirSync(join(dir, 'node_modules', '@hold-dev'), { recursive: true });
  symlinkSync(join(repoRoot, 'js'), join(dir, 'node_modules', '@hold-dev', 'hold'));
  symlinkSync(realDir, join(dir, 'node_modules', 'proper-lockfile'));
  writeFileSync(join(dir, 'tracker.md'), '');
  for (const [name, code] of Object.entries(ex)) writeFileSync(join(dir, name), code);
  const outputs = [];
  for (const name of ['before.js', 'after.js']) {
    const r = await start(process.execPath, [name], { cwd: dir }).exited;
    assert.equal(r.code, 0, `${name}: ${r.stderr}`);
    outputs.push(r.stdout);
  }
  assert.equal(outputs[0], 'locked: true\nlocked: true\n');
  assert.equal(outputs[1], outputs[0]);
});
