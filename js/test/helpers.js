// Shared by the tests: the hold binary, scratch directories and child
// processes. The tests run the real agent: HOLD_BIN names it (the Go test
// that runs `npm test` sets it); without it, the hold command is built from
// this repository's Go tree into a temporary directory.

import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
export const workerScript = fileURLToPath(new URL('./fixtures/worker.mjs', import.meta.url));

/** Bounds every wait in the tests; it only catches hangs. */
export const hangLimit = 60_000;

if (!process.env.HOLD_BIN) {
  const dir = mkdtempSync(join(tmpdir(), 'hold-js-test-bin-'));
  execFileSync('go', ['build', '-o', dir + '/', './cmd/hold'], { cwd: repoRoot, stdio: 'inherit' });
  process.env.HOLD_BIN = join(dir, process.platform === 'win32' ? 'hold.exe' : 'hold');
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
}
export const holdBin = process.env.HOLD_BIN;

// Named locks live in one directory per user: point this test process, and
// the agents it starts, at a directory of its own (HOLD_TEST_NAMED_DIR,
// the tests' override), so that the tests' named locks never land in the
// user's. XDG_RUNTIME_DIR too, where earlier versions kept them.
{
  const run = mkdtempSync(join(tmpdir(), 'hold-js-test-run-'));
  process.env.HOLD_TEST_NAMED_DIR = run;
  process.env.XDG_RUNTIME_DIR = run;
  process.on('exit', () => rmSync(run, { recursive: true, force: true }));
}

/** A scratch directory, removed when the test process exits. */
export function scratch() {
  const dir = mkdtempSync(join(tmpdir(), 'hold-js-test-'));
  scratchDirs.push(dir);
  return dir;
}

// One exit listener removes them all: one per directory would pass Node's
// limit of ten listeners, which it reports as a leak.
const scratchDirs = [];
process.on('exit', () => {
  for (const dir of scratchDirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * Starts a child process; returns it with `exited` (a promise of
 * { code, signal, stdout, stderr }) and `line()` (the next stdout line).
 */
export function start(cmd, args, opts = {}) {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  let stdout = '';
  let stderr = '';
  const waiters = [];
  let consumed = 0;
  child.stdout.setEncoding('utf8');
  child.stderr.setEncoding('utf8');
  child.stdout.on('data', (d) => {
    stdout += d;
    wake();
  });
  child.stderr.on('data', (d) => { stderr += d; });
  const exited = new Promise((resolve) => {
    child.on('close', (code, signal) => {
      wake();
      resolve({ code, signal, stdout, stderr });
    });
  });
  function wake() {
    while (waiters.length > 0) {
      const nl = stdout.indexOf('\n', consumed);
      if (nl < 0) break;
      const line = stdout.slice(consumed, nl);
      consumed = nl + 1;
      waiters.shift().resolve(line);
    }
    if (child.exitCode !== null || child.signalCode !== null) {
      for (const w of waiters.splice(0)) w.reject(new Error(`${cmd} exited before printing a line; stderr: ${stderr}`));
    }
  }
  child.line = () => new Promise((resolve, reject) => {
    waiters.push({ resolve, reject });
    wake();
  });
  // Bounded only when someone waits for it.
  Object.defineProperty(child, 'exited', { get: () => withTimeout(exited, `${cmd} ${args.join(' ')}`) });
  return child;
}

/**
 * Starts a command in its own process group, so that killGroup ends it
 * with everything it started (a `sleep` that would keep its pipes open).
 */
export function startGroup(cmd, args, opts = {}) {
  const child = start(cmd, args, { ...opts, detached: true });
  child.killGroup = () => {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  return child;
}

/** Starts the test worker (fixtures/worker.mjs) in a Node process. */
export function startWorker(args, opts = {}) {
  return start(process.execPath, [workerScript, ...args], opts);
}

/** Rejects if p does not settle within hangLimit. */
export function withTimeout(p, what, ms = hangLimit) {
  let timer;
  const t = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** Whether process pid exists. */
export function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/** Waits until process pid has exited. */
export async function waitGone(pid) {
  const deadline = Date.now() + hangLimit;
  while (alive(pid)) {
    if (Date.now() > deadline) throw new Error(`pid ${pid} still runs after ${hangLimit} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
