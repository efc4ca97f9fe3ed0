import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readlinkSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { repoRoot, scratch, start } from './helpers.js';

const jsDir = join(repoRoot, 'js');

// The release path: the script builds and packs the platform package (for
// this host only: all six take too long for a test), and a project with
// neither Go nor hold on PATH and no HOLD_BIN installs it from its tarball
// and takes a lock with the hold inside it.
test('the platform package built by the script runs a lock without Go or HOLD_BIN', { timeout: 600_000 }, async () => {
  const dir = scratch();
  const dist = join(dir, 'dist');
  const out = execFileSync(process.execPath, [join(jsDir, 'scripts', 'build-platform-packages.mjs'), '--out', dist, '--no-remote', 'host'],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  const platformTarball = out.trim().split('\n').pop();
  assert.ok(existsSync(platformTarball), `no tarball at ${platformTarball}`);
  const mainTarball = join(dist, execFileSync('npm', ['pack', '--silent', '--pack-destination', dist], { cwd: jsDir, encoding: 'utf8' }).trim().split('\n').pop());

  const project = join(dir, 'project');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'scratch', private: true, type: 'module' }));
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--silent', platformTarball], { cwd: project, stdio: 'inherit' });
  // The main package goes in unpacked from its tarball: `npm install` of
  // it would look up the five other platforms' optional packages in the
  // registry, and this test uses no network.
  const mainDir = join(project, 'node_modules', '@hold-dev', 'hold');
  mkdirSync(mainDir, { recursive: true });
  execFileSync('tar', ['xzf', mainTarball, '-C', mainDir, '--strip-components=1']);

  // PATH holds node and nothing else.
  const pathDir = join(dir, 'path');
  mkdirSync(pathDir);
  symlinkSync(process.execPath, join(pathDir, 'node'));
  const env = { ...process.env, PATH: pathDir };
  delete env.HOLD_BIN;
  writeFileSync(join(project, 'main.js'), `
    import { lock, tryLock } from '@hold-dev/hold';
    const l = await lock('data');
    let busy = '';
    await tryLock('data').catch((e) => { busy = e.code; });
    console.log(JSON.stringify({ token: l.token, path: l.path, agent: l.owner.pid, busy }));
    await new Promise((r) => setTimeout(r, 100));
    await l.release();
  `);
  const child = start(process.execPath, ['main.js'], { cwd: project, env });
  const line = JSON.parse(await child.line());
  let exe = '';
  try {
    exe = readlinkSync(`/proc/${line.agent}/exe`);
  } catch {
    // not Linux: the lock itself shows the packaged hold ran
  }
  const r = await child.exited;
  assert.equal(r.code, 0, r.stderr);
  assert.equal(line.path, 'data.lock');
  assert.ok(line.token > 0);
  assert.equal(line.busy, 'EBUSY');
  if (exe) assert.match(exe, /node_modules\/@hold-dev\/hold-linux-[a-z0-9]+\/bin\/hold$/);
});
