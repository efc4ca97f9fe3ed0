#!/usr/bin/env node
// Writes the Node package's README examples into a directory, so that tests
// run them exactly as js/README.md shows them:
//
//   node js/scripts/readme-examples.mjs DIR
//
// An example is a ```js block in js/README.md's "Quick start" section whose
// first line is a comment naming its file (// app.js). The script writes
// each to DIR under that name and prints the names, one per line.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = process.argv[2];
if (!dir || process.argv.length > 3) {
  console.error('usage: node js/scripts/readme-examples.mjs DIR');
  process.exit(64);
}
const readme = readFileSync(fileURLToPath(new URL('../README.md', import.meta.url)), 'utf8');
const start = readme.indexOf('\n## Quick start\n');
if (start < 0) throw new Error('js/README.md has no "Quick start" section');
const end = readme.indexOf('\n## ', start + 1);
const section = readme.slice(start, end < 0 ? undefined : end);
let n = 0;
for (const [, code] of section.matchAll(/\n```js\n([\s\S]*?)\n```\n/g)) {
  const name = /^\/\/ ([\w.-]+\.[cm]?js)\n/.exec(code)?.[1];
  if (!name) continue;
  writeFileSync(join(dir, name), code + '\n');
  console.log(name);
  n++;
}
if (n === 0) throw new Error('js/README.md\'s "Quick start" section has no examples');
