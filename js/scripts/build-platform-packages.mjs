#!/usr/bin/env node
// Builds the platform packages of @hold-dev/hold from this repository's Go
// tree and packs each with `npm pack`:
//
//   node js/scripts/build-platform-packages.mjs [--out DIR] [--no-remote] [PLATFORM...]
//
// PLATFORM is OS-CPU with OS linux, darwin or windows and CPU x64 or arm64
// (e.g. linux-x64), or "host" for the machine running the script; the
// default is all six. Each package, @hold-dev/hold-OS-CPU, holds bin/hold
// (bin/hold.exe on Windows), a static executable (CGO_ENABLED=0), and
// bin/hold-remote, which serves etcd:// targets, unless --no-remote. The
// tarballs land in DIR (default js/dist), and the script prints their
// paths, one per line. The version is the main package's.

import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const jsDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repoRoot = resolve(jsDir, '..');

// Package OS name -> GOOS and Node's process.platform; CPU -> GOARCH.
const OSES = { linux: { goos: 'linux', node: 'linux' }, darwin: { goos: 'darwin', node: 'darwin' }, windows: { goos: 'windows', node: 'win32' } };
const CPUS = { x64: 'amd64', arm64: 'arm64' };
const HOST_OS = { linux: 'linux', darwin: 'darwin', win32: 'windows' }[process.platform];

function usage(msg) {
  console.error(`build-platform-packages: ${msg}`);
  console.error('usage: node js/scripts/build-platform-packages.mjs [--out DIR] [--no-remote] [PLATFORM...]');
  console.error(`PLATFORM: host, or OS-CPU with OS in ${Object.keys(OSES).join(', ')} and CPU in ${Object.keys(CPUS).join(', ')}`);
  process.exit(64);
}

let out = join(jsDir, 'dist');
let remote = true;
const platforms = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--out') {
    if (i + 1 >= argv.length) usage('--out needs a directory');
    out = resolve(argv[++i]);
  } else if (a === '--no-remote') {
    remote = false;
  } else if (a === 'host') {
    if (!HOST_OS || !CPUS[process.arch]) usage(`no package for this host (${process.platform}-${process.arch})`);
    platforms.push(`${HOST_OS}-${process.arch}`);
  } else if (/^[a-z]+-[a-z0-9]+$/.test(a)) {
    const [os, cpu] = a.split('-');
    if (!OSES[os] || !CPUS[cpu]) usage(`unknown platform ${a}`);
    platforms.push(a);
  } else {
    usage(`unknown argument ${a}`);
  }
}
if (platforms.length === 0) {
  for (const os of Object.keys(OSES)) for (const cpu of Object.keys(CPUS)) platforms.push(`${os}-${cpu}`);
}

const main = JSON.parse(readFileSync(join(jsDir, 'package.json'), 'utf8'));
mkdirSync(out, { recursive: true });

for (const platform of platforms) {
  const [os, cpu] = platform.split('-');
  const name = `@hold-dev/hold-${platform}`;
  const stage = join(out, `stage-${platform}`);
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(join(stage, 'bin'), { recursive: true });
  const exe = os === 'windows' ? '.exe' : '';
  const commands = remote ? ['hold', 'hold-remote'] : ['hold'];
  for (const cmd of commands) {
    execFileSync('go', ['build', '-trimpath', '-ldflags=-s -w', '-o', join(stage, 'bin', cmd + exe), `./cmd/${cmd}`], {
      cwd: repoRoot,
      stdio: ['ignore', 'inherit', 'inherit'],
      env: { ...process.env, GOOS: OSES[os].goos, GOARCH: CPUS[cpu], CGO_ENABLED: '0' },
    });
  }
  writeFileSync(join(stage, 'package.json'), JSON.stringify({
    name,
    version: main.version,
    description: `The hold executable${remote ? 's' : ''} for ${os} on ${cpu}, used by @hold-dev/hold`,
    os: [OSES[os].node],
    cpu: [cpu],
    files: ['bin/'],
    preferUnplugged: true,
  }, null, 2) + '\n');
  writeFileSync(join(stage, 'README.md'), `# ${name}\n\nThe prebuilt \`hold\` command for ${os} on ${cpu}. Install \`@hold-dev/hold\`, which depends on this package optionally and picks the one for your platform.\n`);
  const packed = execFileSync('npm', ['pack', '--silent', '--pack-destination', out], { cwd: stage, encoding: 'utf8' }).trim().split('\n').pop();
  rmSync(stage, { recursive: true, force: true });
  console.log(join(out, packed));
}
