import { execFileSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import { holdBin, scratch, start, startWorker, workerScript } from './helpers.js';

// 16 Node processes add records by read-modify-write under withLock, while
// `hold run` shell workers and Go workers (the library's hold.Do, in `hold
// demo-writer`) do the same to the same file under the same lock: every
// record must be there, exactly once.
test('Node, hold run and Go workers on one lock lose no update', { timeout: 300_000 }, async () => {
  const dir = scratch();
  const file = join(dir, 'records');
  const nodeWorkers = 16;
  const perNode = 50;
  const shellWorkers = 2;
  const perShell = 20;
  const goWorkers = 2;
  const perGo = 50;

  const shellStep = 'cat "$F" > "$F.sh-$$" 2>/dev/null; echo "writer sh$W record $J" >> "$F.sh-$$"; mv "$F.sh-$$" "$F"';
  const shellLoop = `for J in $(seq 1 ${perShell}); do J=$J "$HOLD" run "$F" -c '${shellStep.replaceAll("'", "'\\''")}' || exit 1; done`;
  const procs = [];
  // Half the Node workers keep every request on the agent's standard
  // channel, half use its synchronous channel for tries and releases.
  for (let i = 0; i < nodeWorkers; i++) {
    const env = { ...process.env, HOLD_AGENT_SYNC: i % 2 ? '0' : '1' };
    procs.push(startWorker(['records', file, `node${i}`, String(perNode)], { env }));
  }
  for (let i = 0; i < shellWorkers; i++) {
    procs.push(start('sh', ['-c', shellLoop], { env: { ...process.env, HOLD: holdBin, F: file, W: String(i) } }));
  }
  for (let i = 0; i < goWorkers; i++) procs.push(start(holdBin, ['demo-writer', file, `go${i}`, String(perGo), 'lock']));

  const results = await Promise.all(procs.map((p) => p.exited));
  for (const r of results) assert.equal(r.code, 0, `a worker failed: ${r.stderr}`);

  const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l !== '');
  const want = nodeWorkers * perNode + shellWorkers * perShell + goWorkers * perGo;
  assert.equal(new Set(lines).size, lines.length, 'a record appears twice');
  assert.equal(lines.length, want, `${want - lines.length} records lost`);
});

// With one CPU the package does not poll for the agent's replies, it naps:
// the same work must still come out exact.
test('workers confined to one CPU lose no update', { skip: !hasTaskset() && 'taskset not found' }, async () => {
  const dir = scratch();
  const file = join(dir, 'records');
  const procs = [];
  for (let i = 0; i < 3; i++) procs.push(start('taskset', ['-c', '0', process.execPath, workerScript, 'records', file, `one${i}`, '30']));
  const results = await Promise.all(procs.map((p) => p.exited));
  for (const r of results) assert.equal(r.code, 0, `a worker failed: ${r.stderr}`);
  const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l !== '');
  assert.equal(new Set(lines).size, 90);
  assert.equal(lines.length, 90);
});

function hasTaskset() {
  try {
    execFileSync('taskset', ['-c', '0', 'true']);
    return true;
  } catch {
    return false;
  }
}
