'use strict';
// The Node side of the interop tests: the same roles as the Go workers in
// main_test.go, locking <target>.lock with proper-lockfile.
//
//   node worker.js count TARGET ITERS STALE_MS
//       increment the counter ITERS times under the lock, with the same
//       O_EXCL marker and per-process log as the Go workers
//   node worker.js hold TARGET STALE_MS
//       take the lock, print "held", hold it until stdin closes, release,
//       print "released"
//   node worker.js try TARGET STALE_MS
//       one attempt: print "won" (and release) or "busy"

const fs = require('fs');
const lockfile = require('proper-lockfile');

const [role, target, ...rest] = process.argv.slice(2);

function options(staleMs, retries) {
  return {
    lockfilePath: `${target}.lock`,
    realpath: false,
    stale: staleMs,
    retries,
    onCompromised: (err) => {
      fs.writeFileSync(`${target}.violation`, `node ${process.pid} compromised: ${err.message}\n`);
      process.exit(5);
    },
  };
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

function criticalSection() {
  const marker = `${target}.marker`;
  for (;;) {
    try {
      fs.writeFileSync(marker, String(process.pid), { flag: 'wx' });
      break;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
      const pid = Number(fs.readFileSync(marker, 'utf8'));
      if (pid > 0 && alive(pid)) {
        fs.writeFileSync(`${target}.violation`, `${process.pid} and ${pid}\n`);
        process.exit(3);
      }
      fs.rmSync(marker, { force: true });
    }
  }
  let n = 0;
  try {
    n = Number(fs.readFileSync(target, 'utf8').trim()) || 0;
  } catch { /* no counter yet */ }
  fs.writeFileSync(target, String(n + 1));
  fs.appendFileSync(`${target}.log.${process.pid}`, `${n + 1}\n`);
  fs.rmSync(marker);
}

async function main() {
  if (role === 'count') {
    const [iters, staleMs] = rest.map(Number);
    // forever: retry builds an array of every timeout up front, so a large
    // retries count costs a second per lock() call.
    const retries = { retries: 20, forever: true, factor: 1.3, minTimeout: 1, maxTimeout: 20, randomize: true };
    for (let i = 0; i < iters; i++) {
      const release = await lockfile.lock(target, options(staleMs, retries));
      criticalSection();
      await release();
    }
    return;
  }
  if (role === 'hold') {
    const staleMs = Number(rest[0]);
    const release = await lockfile.lock(target, options(staleMs, { retries: 20, forever: true, minTimeout: 5, maxTimeout: 20 }));
    process.stdout.write('held\n');
    process.stdin.resume();
    process.stdin.on('end', async () => {
      await release();
      process.stdout.write('released\n');
      process.exit(0);
    });
    return;
  }
  if (role === 'try') {
    const staleMs = Number(rest[0]);
    try {
      const release = await lockfile.lock(target, options(staleMs, 0));
      process.stdout.write('won\n');
      await release();
    } catch (err) {
      if (err.code !== 'ELOCKED') throw err;
      process.stdout.write('busy\n');
    }
    return;
  }
  throw new Error(`unknown role ${role}`);
}

main().catch((err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(2);
});
