#!/usr/bin/env node
// Packs @hold-dev/hold's platform packages from hold executables already
// built (by the release build, scripts/release), and optionally the main
// package, all at one version, each with `npm pack`:
//
//   node js/scripts/build-platform-packages.mjs [--out DIR] [--version V] [--main] PLATFORM=FILE[,FILE...]...
//
// PLATFORM is OS-CPU with OS linux, darwin or windows and CPU x64 or arm64
// (e.g. linux-x64), or "host" for the machine running the script. Each FILE
// is a hold, hold-remote or hold-postgres executable (hold.exe ... for
// Windows) built for that platform; its name says which, and hold is
// required. The package @hold-dev/hold-OS-CPU gets them in bin/. V (default:
// js/package.json's version) must be semver; with --main the main package
// is packed at V too, its optional dependencies on the six platform
// packages pinned to V, so that the packages always move in lockstep. The
// tarballs land in DIR (default js/dist); the script prints their paths,
// one per line.
//
// This is the one place a platform package is made: the release script and
// js/test/platform.test.js both run it.

import { copyFileSync, chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const jsDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repoRoot = resolve(jsDir, '..');

// Package OS name -> Node's process.platform; CPU names are Node's.
const OSES = { linux: 'linux', darwin: 'darwin', windows: 'win32' };
const CPUS = ['x64', 'arm64'];
const HOST_OS = Object.keys(OSES).find((os) => OSES[os] === process.platform);
const COMMANDS = ['hold', 'hold-remote', 'hold-postgres'];
// Semantic versioning 2.0.0's grammar, which npm enforces.
const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

function usage(msg) {
  console.error(`build-platform-packages: ${msg}`);
  console.error('usage: node js/scripts/build-platform-packages.mjs [--out DIR] [--version V] [--main] PLATFORM=FILE[,FILE...]...');
  console.error(`PLATFORM: host, or OS-CPU with OS in ${Object.keys(OSES).join(', ')} and CPU in ${CPUS.join(', ')}`);
  process.exit(64);
}

const main = JSON.parse(readFileSync(join(jsDir, 'package.json'), 'utf8'));
let out = join(jsDir, 'dist');
let version = main.version;
let packMain = false;
const platforms = new Map(); // OS-CPU -> executable paths
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (a === '--out' || a === '--version') {
    if (i + 1 >= argv.length) usage(`${a} needs a value`);
    if (a === '--out') out = resolve(argv[++i]);
    else version = argv[++i];
  } else if (a === '--main') {
    packMain = true;
  } else if (a.includes('=')) {
    let [platform, files] = [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)];
    if (platform === 'host') {
      if (!HOST_OS || !CPUS.includes(process.arch)) usage(`no package for this host (${process.platform}-${process.arch})`);
      platform = `${HOST_OS}-${process.arch}`;
    }
    const [os, cpu] = platform.split('-');
    if (!(os in OSES) || !CPUS.includes(cpu) || platform !== `${os}-${cpu}`) usage(`unknown platform ${platform}`);
    if (platforms.has(platform)) usage(`${platform} given twice`);
    platforms.set(platform, files.split(',').filter(Boolean).map((f) => resolve(f)));
  } else {
    usage(`unknown argument ${a}`);
  }
}
if (!SEMVER.test(version)) usage(`version ${JSON.stringify(version)} is not semver`);
if (platforms.size === 0 && !packMain) usage('nothing to pack: give PLATFORM=FILE arguments, --main, or both');

mkdirSync(out, { recursive: true });

/** Packs the staged directory into out; returns the tarball's path. */
function pack(stage) {
  const name = execFileSync('npm', ['pack', '--silent', '--pack-destination', out], { cwd: stage, encoding: 'utf8' }).trim().split('\n').pop();
  rmSync(stage, { recursive: true, force: true });
  return join(out, name);
}

/** The metadata every package shares with the main one. */
const common = { license: main.license, repository: main.repository, homepage: main.homepage };

for (const [platform, files] of platforms) {
  const [os, cpu] = platform.split('-');
  const exe = os === 'windows' ? '.exe' : '';
  const name = `@hold-dev/hold-${platform}`;
  const stage = join(out, `stage-${platform}`);
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(join(stage, 'bin'), { recursive: true });
  const commands = [];
  for (const file of files) {
    const cmd = COMMANDS.find((c) => basename(file) === c + exe);
    if (!cmd) usage(`${file}: not one of ${COMMANDS.map((c) => c + exe).join(', ')}`);
    if (commands.includes(cmd)) usage(`${platform}: ${cmd} given twice`);
    commands.push(cmd);
    copyFileSync(file, join(stage, 'bin', cmd + exe));
    chmodSync(join(stage, 'bin', cmd + exe), 0o755);
  }
  if (!commands.includes('hold')) usage(`${platform}: no hold${exe} among ${files.join(', ')}`);
  writeFileSync(join(stage, 'package.json'), JSON.stringify({
    name,
    version,
    description: `The hold executable${commands.length > 1 ? 's' : ''} for ${os} on ${cpu}, used by @hold-dev/hold`,
    ...common,
    os: [OSES[os]],
    cpu: [cpu],
    files: ['bin/'],
    preferUnplugged: true,
  }, null, 2) + '\n');
  writeFileSync(join(stage, 'README.md'), `# ${name}\n\nThe prebuilt ${commands.map((c) => `\`${c}\``).join(', ')} for ${os} on ${cpu}. Install \`@hold-dev/hold\`, which depends on this package optionally and picks the one for your platform.\n`);
  copyFileSync(join(repoRoot, 'LICENSE'), join(stage, 'LICENSE'));
  console.log(pack(stage));
}

if (packMain) {
  const stage = join(out, 'stage-main');
  rmSync(stage, { recursive: true, force: true });
  mkdirSync(stage, { recursive: true });
  for (const f of main.files) {
    copyFileSync(f === 'LICENSE' ? join(repoRoot, 'LICENSE') : join(jsDir, f), join(stage, f));
  }
  const optionalDependencies = {};
  for (const dep of Object.keys(main.optionalDependencies)) optionalDependencies[dep] = version;
  writeFileSync(join(stage, 'package.json'), JSON.stringify({ ...main, version, optionalDependencies, scripts: undefined }, null, 2) + '\n');
  console.log(pack(stage));
}
