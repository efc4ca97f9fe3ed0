import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, test } from 'node:test';

import { holdBin, repoRoot, scratch, start } from './helpers.js';

// The release path, as a user meets it: the script that packs the release
// build's binaries makes this platform's package and the main package, a
// project made by `npm init -y` installs both tarballs, and the README's
// Node examples run with neither Go nor hold on PATH and no HOLD_BIN.

const jsDir = join(repoRoot, 'js');
const version = '1.2.3-test.0';
const OS = { linux: 'linux', darwin: 'darwin', win32: 'windows' }[process.platform];
const hostPackage = OS && ['x64', 'arm64'].includes(process.arch) ? `@hold-dev/hold-${OS}-${process.arch}` : null;
const skip = hostPackage ? false : `no platform package for ${process.platform}-${process.arch}`;

let dir;
let mainTarball;
let platformTarball;
let env;

before(() => {
  if (skip) return;
  dir = scratch();
  // The script takes an executable's role from its name.
  const bin = join(dir, 'bin');
  mkdirSync(bin);
  const exe = join(bin, process.platform === 'win32' ? 'hold.exe' : 'hold');
  copyFileSync(holdBin, exe);
  const out = execFileSync(process.execPath, [join(jsDir, 'scripts', 'build-platform-packages.mjs'),
    '--out', join(dir, 'dist'), '--version', version, '--main', `host=${exe}`],
  { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  [platformTarball, mainTarball] = out.trim().split('\n');
  // PATH holds node and nothing else.
  const pathDir = join(dir, 'path');
  mkdirSync(pathDir);
  symlinkSync(process.execPath, join(pathDir, process.platform === 'win32' ? 'node.exe' : 'node'));
  env = { ...process.env, PATH: pathDir };
  delete env.HOLD_BIN;
});

/** The package.json inside a tarball. */
function manifest(tarball) {
  return JSON.parse(execFileSync('tar', ['xzOf', tarball, 'package/package.json'], { encoding: 'utf8' }));
}

/**
 * A project made by `npm init -y` with the tarballs installed and the
 * README's examples written into it; returns its directory and the names of
 * the examples. --offline: the five other platform packages are optional
 * and not in the cache, so npm skips them, as it would skip packages of
 * other platforms from the registry.
 */
function project(name, tarballs) {
  const p = join(dir, name);
  mkdirSync(p);
  execFileSync('npm', ['init', '-y'], { cwd: p, stdio: 'ignore' });
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--silent', ...tarballs], { cwd: p, stdio: 'inherit' });
  const examples = execFileSync(process.execPath, [join(jsDir, 'scripts', 'readme-examples.mjs'), p], { encoding: 'utf8' }).trim().split('\n');
  return { dir: p, examples };
}

test('the packages are packed at one version, the platform one with this machine\'s hold', { skip }, () => {
  const main = manifest(mainTarball);
  const platform = manifest(platformTarball);
  assert.equal(main.name, '@hold-dev/hold');
  assert.equal(main.version, version);
  assert.equal(main.license, 'MIT');
  assert.equal(main.scripts, undefined);
  assert.deepEqual(Object.keys(main.optionalDependencies).sort(),
    ['darwin-arm64', 'darwin-x64', 'linux-arm64', 'linux-x64', 'windows-arm64', 'windows-x64'].map((p) => `@hold-dev/hold-${p}`));
  for (const [dep, v] of Object.entries(main.optionalDependencies)) assert.equal(v, version, dep);
  assert.equal(platform.name, hostPackage);
  assert.equal(platform.version, version);
  assert.equal(platform.license, 'MIT');
  const files = execFileSync('tar', ['tzf', platformTarball], { encoding: 'utf8' }).trim().split('\n').sort();
  const exe = process.platform === 'win32' ? '.exe' : '';
  assert.deepEqual(files, ['package/LICENSE', 'package/README.md', `package/bin/hold${exe}`, 'package/package.json']);
  const packed = execFileSync('tar', ['xzOf', platformTarball, `package/bin/hold${exe}`], { maxBuffer: 1 << 30 });
  assert.ok(packed.equals(readFileSync(holdBin)), 'the packed hold is not the one given');
});

test('the README\'s examples run, with require and with import, from the tarballs without Go, hold or HOLD_BIN', { skip, timeout: 300_000 }, async () => {
  const p = project('with-platform', [mainTarball, platformTarball]);
  assert.deepEqual(p.examples.sort(), ['app.js', 'app.mjs']);
  // npm init -y makes a CommonJS project: app.js must require.
  assert.match(readFileSync(join(p.dir, 'app.js'), 'utf8'), /require\('@hold-dev\/hold'\)/);
  assert.match(readFileSync(join(p.dir, 'app.mjs'), 'utf8'), /^import .* from '@hold-dev\/hold';$/m);
  for (const example of p.examples) {
    const r = await start(process.execPath, [example], { cwd: p.dir, env }).exited;
    assert.equal(r.code, 0, `${example}: ${r.stderr}`);
    assert.match(r.stdout, /^holding tracker\.md\.lock, fencing token [1-9]\d*\n$/, example);
  }
});

test('without its platform package, the first lock names the package to install and HOLD_BIN', { skip, timeout: 300_000 }, async () => {
  const p = project('without-platform', [mainTarball]);
  for (const example of p.examples) {
    const r = await start(process.execPath, [example], { cwd: p.dir, env }).exited;
    assert.notEqual(r.code, 0, `${example} ran without a hold executable`);
    assert.ok(r.stderr.includes(`npm install ${hostPackage}@${version}`), `${example}: ${r.stderr}`);
    assert.match(r.stderr, /EAGENT/);
    assert.match(r.stderr, /HOLD_BIN/);
    // What works before anything is published: a hold built from a clone.
    assert.ok(r.stderr.includes('go install ./cmd/...') && r.stderr.includes('go env GOPATH'), `${example}: ${r.stderr}`);
  }
});

test('the proper-lockfile drop-in ships in the tarball, for require and import', { skip, timeout: 300_000 }, async () => {
  const p = project('drop-in', [mainTarball, platformTarball]);
  writeFileSync(join(p.dir, 'tracker.md'), '');
  writeFileSync(join(p.dir, 'drop-in.js'), `const lockfile = require('@hold-dev/hold/proper-lockfile');
lockfile.lock('tracker.md').then(async (release) => {
  console.log(await lockfile.check('tracker.md'));
  await release();
});
`);
  writeFileSync(join(p.dir, 'drop-in.mjs'), `import lockfile, { lockSync, checkSync } from '@hold-dev/hold/proper-lockfile';
const release = lockSync('tracker.md');
console.log(checkSync('tracker.md'), lockfile.checkSync === checkSync);
release();
`);
  for (const [script, want] of [['drop-in.js', 'true\n'], ['drop-in.mjs', 'true true\n']]) {
    const r = await start(process.execPath, [script], { cwd: p.dir, env }).exited;
    assert.equal(r.code, 0, `${script}: ${r.stderr}`);
    assert.equal(r.stdout, want, script);
  }
});
