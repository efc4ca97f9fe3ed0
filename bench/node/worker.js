'use strict';
// A bench worker in Node, locking with proper-lockfile: the baseline the
// portable protocol is measured against, on the same work as the Go
// workers (see main.go's workerMain; this speaks the same protocol).
//
//   node worker.js MODE DIR M BUDGET_MS
//
// MODE "seed": what the seed's named lock does: lockSync with no retries,
// and on ELOCKED a synchronous 25 ms sleep before the next attempt.
// MODE "retry": the asynchronous lock() with a fast retry policy (1 ms
// first retry, factor 1.3, randomized, capped at 20 ms), proper-lockfile's
// own backoff tuned for a busy lock.
// Both use stale 10 s (proper-lockfile's default) and realpath: false.
// MODE "hold": this repository's Node package (its path in $HOLD_JS, its
// agent in $HOLD_BIN): lock() and release(), a kernel lock held by the
// process's hold agent.
// MODE "hold-sync": the same package's synchronous API, lockSync() and
// releaseSync(), the calls the seeds' synchronous callers make: a wait
// blocks in a read of the agent's synchronous channel.
// MODE "hold-drop-in-seed": "seed" verbatim, with proper-lockfile's import
// switched to the same package's drop-in (@hold-dev/hold/proper-lockfile,
// proper-lockfile.cjs beside $HOLD_JS): lockSync() and its release
// function, on the <file>.lock directory of hold's portable protocol.
//
// It writes "r" when warmed up, starts when stdin closes, takes the lock M
// times or until BUDGET_MS is spent, and writes its report to stdout as
// little-endian int64s: cycles, start, end, count, then count quadruples
// (wait, hold, got, releasing) in nanoseconds; start, end, got and
// releasing are Unix times.

const fs = require('fs');
const path = require('path');
const mode0 = process.argv[2];
const lockfile = mode0 === 'hold-drop-in-seed'
  ? require(path.join(path.dirname(process.env.HOLD_JS), 'proper-lockfile.cjs'))
  : mode0.startsWith('hold') ? null : require('proper-lockfile');

const [mode, dir, mArg, budgetArg] = process.argv.slice(2);
const m = Number(mArg);
const budgetMs = Number(budgetArg);
const target = path.join(dir, 'target');
const counter = fs.openSync(path.join(dir, 'counter'), 'r+');
const width = 21;
const buf = Buffer.alloc(width);

// Unix time in ns, as a Number (sub-µs precision is lost; µs is kept).
const origin = performance.timeOrigin;
const nowNs = () => Math.round((origin + performance.now()) * 1e6);

function criticalSection() {
  fs.readSync(counter, buf, 0, width, 0);
  const n = Number(buf.toString('latin1', 0, width - 1));
  if (!Number.isInteger(n)) throw new Error(`counter ${buf}`);
  fs.writeSync(counter, `${String(n + 1).padStart(20, '0')}\n`, 0, 'latin1');
}

const options = { lockfilePath: `${target}.lock`, realpath: false, stale: 10000 };
const retryOptions = {
  ...options,
  retries: { retries: 20, forever: true, factor: 1.3, minTimeout: 1, maxTimeout: 20, randomize: true },
};

const sleeper = new Int32Array(new SharedArrayBuffer(4));

function seedCycle() {
  const start = nowNs();
  let release;
  for (;;) {
    try {
      release = lockfile.lockSync(target, options);
      break;
    } catch (err) {
      if (err.code !== 'ELOCKED') throw err;
      Atomics.wait(sleeper, 0, 0, 25);
    }
  }
  const got = nowNs();
  criticalSection();
  const releasing = nowNs();
  release();
  return [start, got, releasing, nowNs()];
}

async function retryCycle() {
  const start = nowNs();
  const release = await lockfile.lock(target, retryOptions);
  const got = nowNs();
  criticalSection();
  const releasing = nowNs();
  await release();
  return [start, got, releasing, nowNs()];
}

let hold = null;

async function holdCycle() {
  const start = nowNs();
  const l = await hold.lock(target);
  const got = nowNs();
  criticalSection();
  const releasing = nowNs();
  await l.release();
  return [start, got, releasing, nowNs()];
}

function holdSyncCycle() {
  const start = nowNs();
  const l = hold.lockSync(target);
  const got = nowNs();
  criticalSection();
  const releasing = nowNs();
  l.releaseSync();
  return [start, got, releasing, nowNs()];
}

/**
 * The CPU time, in ns, that this process's children (its hold agent, for
 * the Node package's modes) have used, from /proc (Linux; 0 elsewhere, and
 * for proper-lockfile, which starts none).
 */
function agentCPU() {
  let ticks = 0;
  try {
    for (const tid of fs.readdirSync('/proc/self/task')) {
      for (const pid of fs.readFileSync(`/proc/self/task/${tid}/children`, 'utf8').split(' ').filter(Boolean)) {
        const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(')').pop().trim().split(' ');
        ticks += Number(f[11]) + Number(f[12]); // utime, stime
      }
    }
  } catch {
    return 0;
  }
  return Math.round((ticks * 1e9) / 100); // USER_HZ is 100 on Linux
}

async function main() {
  if (mode === 'hold' || mode === 'hold-sync') hold = await import(require('url').pathToFileURL(process.env.HOLD_JS).href);
  const byMode = { seed: seedCycle, retry: retryCycle, hold: holdCycle, 'hold-sync': holdSyncCycle, 'hold-drop-in-seed': seedCycle };
  const cycle = byMode[mode];
  if (!cycle) throw new Error(`unknown mode ${mode}`);
  let cycles = 1;
  await cycle(); // warm-up, as the Go workers do
  process.stdout.write('r');
  process.stdin.resume();
  await new Promise((resolve) => process.stdin.on('end', resolve));
  const deadline = Date.now() + budgetMs;
  const cpu0 = process.cpuUsage();
  const agent0 = agentCPU();
  const samples = [];
  let first = 0;
  let last = 0;
  for (let i = 0; i < m && (i === 0 || Date.now() < deadline); i++) {
    const [start, got, releasing, done] = await cycle();
    cycles++;
    if (i === 0) first = start;
    last = done;
    samples.push(got - start, done - got, got, releasing);
  }
  // The CPU the measured cycles used, this process's and its hold agent's,
  // in ns, for the suite's table (on stderr, which it reads after the
  // samples; the Python worker writes the same line).
  const cpu = process.cpuUsage(cpu0);
  process.stderr.write(`cpu ${(cpu.user + cpu.system) * 1000} ${agentCPU() - agent0}\n`);
  const out = Buffer.alloc(8 * (4 + samples.length));
  [cycles, first, last, samples.length / 4, ...samples].forEach((v, i) => out.writeBigInt64LE(BigInt(v), 8 * i));
  process.stdout.write(out, () => process.exit(0));
}

main().catch((err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
