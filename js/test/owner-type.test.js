// The type Owner in index.d.cts against the owner records hold writes:
// lock/testdata/records.json, which a Go test keeps exactly what the Go
// codec writes, with every key of its owner record. A key the records
// have and Owner lacks (or one Owner has that no record does) fails here.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { repoRoot } from './helpers.js';

/** The property names of `export interface NAME { ... }` in a .d.ts file. */
export function interfaceKeys(source, name) {
  const start = source.indexOf(`export interface ${name} {`);
  assert.ok(start >= 0, `no interface ${name}`);
  const end = source.indexOf('\n}', start);
  const body = source.slice(source.indexOf('{', start) + 1, end)
    .replace(/\/\*[\s\S]*?\*\//g, '')
    .replace(/\/\/.*$/gm, '');
  const keys = new Set();
  for (const m of body.matchAll(/^\s*(?:readonly\s+)?([A-Za-z_$][\w$]*)\??\s*:/gm)) keys.add(m[1]);
  return keys;
}

test('the type Owner has every key of the owner records hold writes, and no other', () => {
  const fixture = JSON.parse(readFileSync(`${repoRoot}lock/testdata/records.json`, 'utf8'));
  const recordKeys = new Set([...fixture.records, fixture.past].flatMap((r) => Object.keys(r)));
  const typeKeys = interfaceKeys(readFileSync(`${repoRoot}js/index.d.cts`, 'utf8'), 'Owner');
  assert.ok(recordKeys.size > 5 && typeKeys.size > 5, 'records or type not read');
  const missing = [...recordKeys].filter((k) => !typeKeys.has(k));
  assert.deepEqual(missing, [], `Owner in index.d.cts lacks ${missing.join(', ')}`);
  const extra = [...typeKeys].filter((k) => !recordKeys.has(k));
  assert.deepEqual(extra, [], `Owner in index.d.cts has ${extra.join(', ')}, which no record in lock/testdata/records.json has`);
});
