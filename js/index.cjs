// @hold-dev/hold: cross-process locks for Node, served by `hold agent`.
//
// Node has no kernel file locks of its own, so this package starts one
// `hold agent` child per process, on first use, and talks to it over its
// stdin and stdout in newline-delimited JSON (the protocol is in the
// repository's docs/agent.md). The kernel lock belongs to the agent: when
// this process exits or crashes, the agent's stdin ends, it releases
// everything, and waiters elsewhere get the lock at once. The agent never
// keeps this process alive, not even while a lock is held: its process and
// pipes are referenced only while a request is pending, so a script that
// ends (or calls process.exit) holding a lock exits, and the agent then
// releases it.
//
// Lock requests (lock, tryLock, release, check) take a faster road where
// the system has FIFOs: the agent's synchronous channel, a blocking write
// and read of a few µs, where a round trip through Node's child-process
// streams costs 150 µs or more. They go there marked "queue": the agent
// answers at once what it can (a free lock, a busy try, a release) and
// queues the rest (a wait, a network lock), whose reply then comes on its
// standard output like every other. Which is which is the agent's call
// alone (docs/agent.md): this file carries requests, not lock rules. So a
// free lock costs two short blocking calls. HOLD_AGENT_SYNC=0 in the
// environment keeps every request on the standard channel (and leaves the
// synchronous API, which needs that channel, without it).
//
// The synchronous API (lockSync, updateSync, ...) sends every request on
// that channel, and blocks in a read of its reply, however long a wait
// takes: the thread sleeps in the kernel, burning no CPU. Its waits are
// the agent's, so they exclude the async API's and other processes' alike.
//
// This file is the package for require() and import alike: index.js, the
// ES module entry, re-exports it, so a program that mixes both still has
// one agent.

'use strict';

// Plain module names, not 'node:…': Jest before 27 cannot resolve those.
const { spawn } = require('child_process');
const { closeSync, constants, existsSync, mkdtempSync, openSync, readSync, rmdirSync, writeSync } = require('fs');
const { tmpdir } = require('os');
const { basename, dirname, join } = require('path');
// Not the global: Jest's node environment before 26 lacks it.
const { performance } = require('perf_hooks');
// Neither AbortController nor AbortSignal is named unguarded: Jest's node
// environment before 26 and Node 14 lack them (abort.cjs).
const { isAbortSignal, newAbortController } = require('./abort.cjs');

/**
 * The agent protocol version this package speaks: 4, for the synchronous
 * channel's queued replies (2), lazy acquisitions, whose token and owner
 * record are asked for when first read (3), and releases written ahead of
 * their replies (4, see Agent.releaseAhead).
 */
const PROTOCOL_VERSION = 4;

/**
 * How many releases may be written ahead of their replies before the
 * next one reads them: far fewer than the replies FIFO holds, so that the
 * agent never blocks writing one.
 */
const UNREAD_MAX = 64;

/** How long a process that exits waits for the replies of its releases written ahead, in ms. */
const EXIT_READ_MS = 1000;

// Whether Error.stackTraceLimit may be set (not under --frozen-intrinsics),
// which the synchronous channel's polling does (see syncRequest).
const STACK_LIMIT_WRITABLE = Object.getOwnPropertyDescriptor(Error, 'stackTraceLimit')?.writable === true;

/** How long the synchronous API waits for a starting agent's channel, in ms. */
const SYNC_START_MS = 10_000;

/** Whether this process uses the agent's synchronous channel. */
function syncWanted() {
  return process.platform !== 'win32' && process.env.HOLD_AGENT_SYNC !== '0';
}

/**
 * The error of every failed operation. `code` says what happened:
 * 'EBUSY' (held, and told not to wait), 'ETIMEDOUT' (the wait ran out),
 * 'EABORT' (the wait was aborted through `signal`), 'ELOST' (a held lock
 * was lost, or its agent died), 'EINVAL' (bad target, name or option),
 * 'EAGENT' (the agent died or could not start while a request was
 * pending), and the file errors of update and append ('ENOENT', 'EACCES',
 * ...). For contention errors `holder` describes who holds the lock and
 * the message names them.
 */
class HoldError extends Error {
  constructor(code, message, details = {}) {
    super(message);
    this.name = 'HoldError';
    this.code = code;
    if (details.holder) this.holder = details.holder;
    if (details.hint) this.hint = details.hint;
    if (details.cause) this.cause = details.cause;
  }
}

function fromReply(error) {
  return new HoldError(error.code, error.message, { holder: error.holder, hint: error.hint });
}

// Platform package names use these spellings of process.platform and
// process.arch.
const OS_NAMES = { linux: 'linux', darwin: 'darwin', win32: 'windows' };
const CPU_NAMES = { x64: 'x64', arm64: 'arm64' };

/**
 * Where the hold executable is: $HOLD_BIN, else the platform package
 * (@hold-dev/hold-<os>-<cpu>), else `hold` on PATH. Returns { bin, from }
 * with `from` saying which, and for the PATH fallback `missing`, what to
 * install (see missingBinary).
 */
function findBinary() {
  if (process.env.HOLD_BIN) return { bin: process.env.HOLD_BIN, from: 'HOLD_BIN' };
  const os = OS_NAMES[process.platform];
  const cpu = CPU_NAMES[process.arch];
  if (!os || !cpu) return { bin: 'hold', from: 'PATH', missing: { platform: `${process.platform}-${process.arch}` } };
  const pkg = `@hold-dev/hold-${os}-${cpu}`;
  try {
    const manifest = require.resolve(`${pkg}/package.json`);
    const bin = join(dirname(manifest), 'bin', os === 'windows' ? 'hold.exe' : 'hold');
    if (existsSync(bin)) return { bin, from: pkg };
    return { bin: 'hold', from: 'PATH', missing: { pkg, broken: bin } };
  } catch {
    // not installed: fall back to PATH
  }
  return { bin: 'hold', from: 'PATH', missing: { pkg } };
}

/**
 * The message for a hold executable that could not be started. When the
 * platform package is missing, it names the package to install, at this
 * package's version: npm leaves optional dependencies out, for instance
 * when a lockfile was made on another platform or with --omit=optional.
 */
function missingBinary(found, err) {
  if (found.from === 'HOLD_BIN') {
    return `cannot start the hold agent (HOLD_BIN=${found.bin}): ${err.message}; point HOLD_BIN at a hold executable, or unset it`;
  }
  if (found.from !== 'PATH' || err.code !== 'ENOENT') {
    return `cannot start the hold agent (${found.bin}): ${err.message}`;
  }
  const { pkg, broken, platform } = found.missing;
  if (!pkg) {
    return `cannot start the hold agent: @hold-dev/hold has no platform package for ${platform} and no hold is on PATH; `
      + 'set HOLD_BIN to a hold executable (the release archives have one for FreeBSD too) or put hold on PATH';
  }
  const why = broken ? `is installed without its executable (${broken})` : 'is not installed';
  return `cannot start the hold agent: the platform package ${pkg} ${why} and no hold is on PATH; `
    + 'set HOLD_BIN to a hold executable, or build one from a clone of hold with `go install ./cmd/...` in the clone '
    + 'and put Go\'s bin directory on PATH (export PATH="$PATH:$(go env GOPATH)/bin"); '
    + `where ${pkg} is published, \`npm install ${pkg}@${ownVersion()}\` brings it back (npm skips optional dependencies, for instance when the lockfile was made on another platform)`;
}

/** This package's version, which its platform packages share. */
function ownVersion() {
  try {
    return require('./package.json').version;
  } catch {
    return 'latest';
  }
}

/** Describes this process for holder messages: "app.js, node pid 4200". */
function describeClient() {
  const script = process.argv[1] ? basename(process.argv[1]) : 'node';
  return `${script}, node pid ${process.pid}`;
}

/** One `hold agent` child and the requests and locks it serves. */
class Agent {
  constructor() {
    this.found = findBinary();
    this.bin = this.found.bin;
    this.nextId = 1;
    this.pending = new Map(); // request id -> { resolve, reject }
    this.locks = new Map(); // lock number -> Lock
    this.dead = null; // the HoldError that ended it
    this.buffer = '';
    this.referenced = true;
    this.busy = 0; // updates whose function is running
    this.child = spawn(this.bin, ['agent', '--for', describeClient()], {
      argv0: 'hold',
      stdio: ['pipe', 'pipe', 'inherit'],
      windowsHide: true,
    });
    this.child.on('error', (err) => {
      this.die(new HoldError('EAGENT', missingBinary(this.found, err), { cause: err }));
    });
    this.child.on('close', (code, signal) => {
      const how = signal ? `was killed by ${signal}` : `exited with status ${code}`;
      this.die(new HoldError('EAGENT', `the hold agent (pid ${this.child.pid}) ${how}`));
    });
    // A write to an agent that just died fails here; 'close' reports it.
    this.child.stdin.on('error', () => {});
    this.child.stdout.setEncoding('utf8');
    this.child.stdout.on('data', (chunk) => this.receive(chunk));
    this.sync = null; // { requests, replies, blocking }: descriptors of the synchronous channel
    // The synchronous channel's FIFOs are made by the agent in a private
    // directory made here, so that the synchronous API can open them
    // without waiting for the hello's reply, which only the event loop
    // can read (see openSyncNow).
    this.syncDir = null;
    if (syncWanted()) {
      try {
        this.syncDir = mkdtempSync(join(tmpdir(), 'hold-agent-'));
      } catch {
        // no channel: every request keeps to the standard one
      }
    }
    // Releases written ahead of their replies (releaseAhead): [{ id, lock }],
    // oldest first; and the errors of those that failed, for the next
    // call to throw (takeFailed).
    this.unread = [];
    this.failed = [];
    // "pipeline": a kernel lock's release is written on the synchronous
    // channel without waiting for its reply, which comes with the next
    // request's, so a lock's cycle costs one round trip.
    const sync = this.syncDir !== null;
    const hello = { op: 'hello', version: PROTOCOL_VERSION, sync, pipeline: sync };
    if (this.syncDir) hello.sync_dir = this.syncDir;
    // Settles once the hello is answered (and the synchronous channel
    // opened, if there is one); never rejects.
    this.ready = this.request(hello).then((r) => {
      if (r.version !== PROTOCOL_VERSION) {
        this.kill(new HoldError('EAGENT', `${this.bin} speaks agent protocol ${r.version}, this package ${PROTOCOL_VERSION}: install matching versions`));
        return;
      }
      if (r.sync && !this.dead && !this.sync) this.openSync(r.sync);
      this.forgetSyncDir();
    }, (err) => {
      this.forgetSyncDir();
      if (err.code !== 'EAGENT') this.kill(new HoldError('EAGENT', `the hold agent refused the hello: ${err.message}`));
    });
  }

  /**
   * Opens this side of the synchronous channel. Neither open blocks: the
   * agent holds both FIFOs open for reading and writing. Without it, every
   * request keeps to the standard channel.
   */
  openSync(paths) {
    const fds = [];
    try {
      // Neither open may block, and a FIFO opened for one direction only
      // waits for its other end: the agent may have died since its reply.
      // Opened without blocking, the requests FIFO fails at once (ENXIO)
      // when nobody reads it, and the replies FIFO reads end of file once
      // nobody can write it.
      fds.push(openSync(paths.requests, constants.O_WRONLY | constants.O_NONBLOCK));
      fds.push(openSync(paths.replies, constants.O_RDONLY | constants.O_NONBLOCK));
      // A second, blocking, descriptor of the replies, for the reads
      // that wait: a FIFO opened for reading blocks until it has a
      // writer, so this process is one for that moment (its own
      // reader lets that open succeed at once), then closes it again so
      // that the agent stays the only writer and its death still reads
      // as end of file.
      const writer = openSync(paths.replies, constants.O_WRONLY | constants.O_NONBLOCK);
      try {
        fds.push(openSync(paths.replies, constants.O_RDONLY));
      } finally {
        closeSync(writer);
      }
      const [requests, replies, blocking] = fds;
      this.sync = {
        requests,
        replies,
        blocking,
        buffer: Buffer.alloc(64 * 1024),
        nap: new Int32Array(new SharedArrayBuffer(4)), // for Atomics.wait
        rest: Buffer.alloc(0), // what was read of the replies beyond the last line taken
        // How long to poll for a reply before blocking in a read, in
        // ms: the agent tells it in the channel's first reply.
        spinMs: 0,
      };
    } catch {
      for (const fd of fds) closeSync(fd);
    }
  }

  /**
   * Opens the synchronous channel now, for the synchronous API, waiting
   * (blocked, in naps) for the agent to have made it if it is just
   * starting. Throws a HoldError when there is none.
   */
  openSyncNow(what) {
    if (this.sync) return;
    if (this.dead) throw this.dead;
    if (!this.syncDir) {
      throw new HoldError('ENOTSUP', `${what} needs the agent's synchronous channel, which ${process.platform === 'win32' ? 'Windows, lacking FIFOs, cannot have' : 'HOLD_AGENT_SYNC=0 turns off'}: use the async form`);
    }
    if (this.child.pid === undefined) {
      // spawn failed; its 'error' event is still to come.
      this.die(new HoldError('EAGENT', missingBinary(this.found, { code: 'ENOENT', message: `spawn ${this.bin} ENOENT` })));
      throw this.dead;
    }
    const paths = { requests: join(this.syncDir, 'requests'), replies: join(this.syncDir, 'replies') };
    const nap = new Int32Array(new SharedArrayBuffer(4));
    const start = Date.now();
    for (;;) {
      // The agent opens the replies first, so a requests FIFO that opens
      // (it fails with ENXIO until the agent reads it) means both are ready.
      let fd;
      try {
        fd = openSync(paths.requests, constants.O_WRONLY | constants.O_NONBLOCK);
      } catch (err) {
        if (err.code !== 'ENOENT' && err.code !== 'ENXIO') throw new HoldError('EAGENT', `cannot open the hold agent's synchronous channel: ${err.message}`, { cause: err });
      }
      if (fd !== undefined) {
        closeSync(fd);
        this.openSync(paths);
        if (this.sync) return;
        throw new HoldError('EAGENT', `cannot open the hold agent's synchronous channel in ${this.syncDir}`);
      }
      if (Date.now() - start > SYNC_START_MS) {
        this.kill(new HoldError('EAGENT', `the hold agent (pid ${this.child.pid}) did not open its synchronous channel within ${SYNC_START_MS / 1000}s: is ${this.bin} as new as this package?`));
        throw this.dead;
      }
      Atomics.wait(nap, 0, 0, 2);
    }
  }

  /** Removes the channel's directory if the agent did not (it does once used). */
  forgetSyncDir() {
    if (!this.syncDir) return;
    try { rmdirSync(this.syncDir); } catch { /* the agent's now, or gone */ }
  }

  /**
   * Sends msg on the synchronous channel and blocks until its reply, a few
   * µs. Returns the reply, or null if the channel is gone (the agent died:
   * the agent is then marked dead, with the standard channel's error when
   * that one has come).
   */
  syncRequest(msg) {
    const ch = this.sync;
    const line = Buffer.from(JSON.stringify({ id: this.nextId++, ...msg }) + '\n');
    try {
      syncWrite(ch, line);
      // The agent answers in order: the releases written ahead first.
      this.readUnread(ch);
      return syncReply(ch, syncReadLine(ch));
    } catch (err) {
      this.syncBroke(err);
      return null;
    }
  }

  /** Marks the agent dead: its synchronous channel failed with err. */
  syncBroke(err) {
    this.closeSyncChannel();
    this.kill(new HoldError('EAGENT', `the hold agent (pid ${this.child.pid}) stopped answering: ${err.message}`, { cause: err }));
  }

  /**
   * Writes lock's release (lock number) on the synchronous channel
   * without waiting for its reply: the next request there reads it
   * (readUnread), and so does the next one on the standard channel
   * (barrier), so that the agent has served the release first. The
   * release is in the agent's input when this returns: the lock is
   * free for the next holder at once, whatever this process does next.
   * A failed release is kept (failed) for the next call to throw. Only
   * for a lock whose reply allowed it ("release_ahead": a kernel lock).
   * Returns false if the channel broke (the agent is then dead).
   */
  releaseAhead(lock, number) {
    const ch = this.sync;
    const id = this.nextId++;
    // "sent": when this process let go, on the clock the agent reads too
    // (CLOCK_MONOTONIC, which process.hrtime reads on Linux, the only
    // system whose agent lets a release go ahead), so that a loss the
    // agent hears of after it is not this release's failure.
    const line = Buffer.from(`{"id":${id},"op":"release","lock":${number},"queue":true,"sent":${process.hrtime.bigint()}}\n`);
    try {
      syncWrite(ch, line);
      this.unread.push({ id, lock });
      if (this.unread.length >= UNREAD_MAX) this.readUnread(ch);
    } catch (err) {
      this.syncBroke(err);
      return false;
    }
    watchExit();
    return true;
  }

  /**
   * Reads the replies of the releases written ahead, oldest first,
   * keeping the error of each that failed. limitMs bounds the wait (for
   * a process that exits); otherwise a reply due in µs is waited for.
   */
  readUnread(ch, limitMs) {
    while (this.unread.length > 0) {
      const text = syncReadLine(ch, limitMs);
      const { id, lock } = this.unread.shift();
      if (text === `{"id":${id},"ok":true}`) continue; // the usual reply, without a parser
      const r = syncReply(ch, text);
      if (r.id !== id) throw new Error(`the reply ${text.slice(0, 80)} does not answer the release ${id}`);
      if (r.queued) {
        // Served on the standard channel after all: its reply comes there.
        this.expect(id).catch((err) => this.releaseFailed(lock, err));
      } else if (!r.ok) {
        this.releaseFailed(lock, fromReply(r.error));
      }
    }
  }

  /** Keeps the failure err of lock's release written ahead, for the next call to throw. */
  releaseFailed(lock, err) {
    // The agent's death releases every lock: no failure of this one.
    if (err.code === 'EAGENT') return;
    const lost = err.code === 'ELOST' ? err : new HoldError('ELOST', `lock ${lock.path} was not released cleanly: ${err.message}`, { holder: err.holder, hint: err.hint });
    lock._releaseFailed(lost);
    this.failed.push(lost);
  }

  /**
   * Reads the replies of the releases written ahead, so that a request
   * on the standard channel comes after them. The standard channel's
   * requests are served on another thread of the agent than the
   * synchronous channel's, in no order with them.
   */
  barrier() {
    if (this.unread.length === 0 || !this.sync) return;
    try {
      this.readUnread(this.sync);
    } catch (err) {
      this.syncBroke(err);
    }
  }

  /**
   * Takes the first failure of a release written ahead that no call has
   * thrown yet, or null: each call that could throw one throws it.
   */
  takeFailed() {
    return this.failed.length > 0 ? this.failed.shift() : null;
  }

  /** barrier(), then throws a failure of a release written ahead. */
  throwFailed() {
    this.barrier();
    const err = this.takeFailed();
    if (err) throw err;
  }

  /**
   * For a process that exits: reads the replies of its releases written
   * ahead (a few µs, a second at most) and warns on stderr of each that
   * failed and of the failures no call threw: nothing is left to throw
   * them. (A warning emitted now would never be printed.)
   */
  exiting() {
    if (this.sync && this.unread.length > 0) {
      try {
        this.readUnread(this.sync, EXIT_READ_MS);
      } catch {
        // no answer: the agent, its stdin ending, releases everything
      }
    }
    for (const err of this.failed.splice(0)) {
      try {
        writeSync(2, `(node:${process.pid}) HoldWarning: ${err.message} (the failure of a release written ahead, which no call was left to throw as the process exited)\n`);
      } catch {
        // no stderr
      }
    }
  }

  /**
   * Sends msg on the synchronous channel marked "queue", so that it never
   * blocks there: resolves with its reply, given at once or, when the
   * agent queued the request, on the standard channel under the same id.
   * A queued wait is cancelled when signal aborts. Rejects with the
   * reply's error.
   */
  async queueable(msg, signal) {
    const r = this.syncRequest({ ...msg, queue: true });
    if (r === null) throw this.dead;
    if (!r.queued) {
      if (!r.ok) throw fromReply(r.error);
      return r;
    }
    return cancelOnAbort(this, this.expect(r.id), r.id, signal);
  }

  /** Resolves with the reply to request id, to come on the standard channel. */
  expect(id) {
    if (this.dead) return Promise.reject(this.dead);
    const p = new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
    });
    this.updateRef();
    return p;
  }

  closeSyncChannel() {
    if (!this.sync) return;
    for (const fd of [this.sync.requests, this.sync.replies, this.sync.blocking]) {
      try { closeSync(fd); } catch { /* closed already */ }
    }
    this.sync = null;
  }

  /** Sends msg with a fresh id; resolves with the reply, rejects with its error. */
  request(msg, onSent) {
    this.barrier();
    if (this.dead) return Promise.reject(this.dead);
    const id = this.nextId++;
    const p = new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
    });
    this.child.stdin.write(JSON.stringify({ id, ...msg }) + '\n');
    if (onSent) onSent(id);
    this.updateRef();
    return p;
  }

  /** Sends msg and forgets it: its reply is not awaited. */
  send(msg) {
    if (this.dead) return;
    this.request(msg).catch(() => {});
  }

  receive(chunk) {
    this.buffer += chunk;
    let nl;
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl);
      this.buffer = this.buffer.slice(nl + 1);
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        continue; // not ours: the protocol writes only JSON lines
      }
      this.dispatch(msg);
    }
  }

  dispatch(msg) {
    if (msg.event === 'lost') {
      const lock = this.locks.get(msg.lock);
      if (lock) lock._lose(fromReply(msg.error ?? { code: 'ELOST', message: `lock ${lock.path} lost` }));
      return;
    }
    const waiter = this.pending.get(msg.id);
    if (!waiter) return;
    this.pending.delete(msg.id);
    if (msg.ok) waiter.resolve(msg);
    else waiter.reject(fromReply(msg.error));
    this.updateRef();
  }

  /**
   * Keeps the event loop alive only while a request is pending or an
   * update's function runs: a held lock does not, so that a script that
   * is done exits (its agent then releases the lock).
   */
  updateRef() {
    const busy = this.pending.size > 0 || this.busy > 0;
    if (busy === this.referenced || this.dead) return;
    this.referenced = busy;
    const how = busy ? 'ref' : 'unref';
    this.child[how]();
    this.child.stdin[how]?.();
    this.child.stdout[how]?.();
  }

  die(err) {
    if (this.dead) return;
    this.dead = err;
    this.closeSyncChannel();
    // Its death released them, written ahead or not.
    this.unread = [];
    if (agent === this) agent = null;
    for (const { reject } of this.pending.values()) reject(err);
    this.pending.clear();
    for (const lock of this.locks.values()) {
      lock._lose(new HoldError('ELOST', `lock ${lock.path} lost: ${err.message}`));
    }
    this.locks.clear();
  }

  kill(err) {
    this.die(err);
    this.child.kill();
  }
}

/** Writes line on the synchronous channel's requests FIFO, all of it. */
function syncWrite(ch, line) {
  for (let off = 0; off < line.length;) {
    try {
      off += writeSync(ch.requests, line, off);
    } catch (err) {
      // Full: the agent is reading; EPIPE (it died) is thrown on.
      if (err.code !== 'EAGAIN' && err.code !== 'EINTR') throw err;
      Atomics.wait(ch.nap, 0, 0, 0.05);
    }
  }
}

/**
 * Reads the synchronous channel's next reply line (without its newline).
 * A reply that is due in µs (a try, a release) is polled for, for as long
 * as the agent said (spin_us): waking a thread asleep in a read costs
 * tens of µs on a virtual machine. After that the thread blocks in a read
 * of the blocking descriptor, however long a wait lasts, burning no CPU;
 * the agent's death ends it (end of file: it was the only writer). With
 * limitMs, it polls in naps instead, and throws once limitMs have passed.
 */
function syncReadLine(ch, limitMs) {
  const start = performance.now();
  // Without a polling budget (spin_us 0: a machine with one CPU) a
  // poll would only fail, at the cost of a system call and an
  // exception: the read blocks at once.
  let fd = limitMs === undefined && ch.spinMs === 0 ? ch.blocking : ch.replies;
  for (;;) {
    const nl = ch.rest.indexOf(0x0a);
    if (nl >= 0) {
      const text = ch.rest.toString('utf8', 0, nl);
      ch.rest = ch.rest.subarray(nl + 1);
      return text;
    }
    let n;
    // A poll that finds nothing throws EAGAIN, and the stack trace
    // Node captures for every failed call is most of what that
    // costs (about half, measured): none is taken for these, whose
    // only use is their code. (The limit is put back at once; no
    // other code runs meanwhile.)
    const limit = Error.stackTraceLimit;
    const mute = fd === ch.replies && STACK_LIMIT_WRITABLE;
    if (mute) Error.stackTraceLimit = 0;
    try {
      n = readSync(fd, ch.buffer, 0, ch.buffer.length, null);
    } catch (err) {
      if (err.code !== 'EAGAIN' && err.code !== 'EINTR') throw err;
      if (err.code !== 'EAGAIN') continue;
      const waited = performance.now() - start;
      if (limitMs !== undefined) {
        if (waited > limitMs) throw new Error(`no reply within ${limitMs} ms`);
        Atomics.wait(ch.nap, 0, 0, 1);
      } else if (waited > ch.spinMs) {
        fd = ch.blocking;
      }
      continue;
    } finally {
      if (mute) Error.stackTraceLimit = limit;
    }
    if (n === 0) throw new Error('end of file');
    const got = ch.buffer.subarray(0, n);
    if (ch.rest.length === 0) {
      // The usual case, a whole line or more: taken from the read
      // buffer itself, only what follows it copied.
      const end = got.indexOf(0x0a);
      if (end >= 0) {
        if (end + 1 < n) ch.rest = Buffer.from(got.subarray(end + 1));
        return got.toString('utf8', 0, end);
      }
      ch.rest = Buffer.from(got);
    } else {
      ch.rest = Buffer.concat([ch.rest, got]);
    }
    if (limitMs === undefined) fd = ch.blocking; // the rest of a long reply is on its way
  }
}

/** Parses a reply line of the synchronous channel, keeping its spin_us. */
function syncReply(ch, text) {
  const r = JSON.parse(text);
  if (r.spin_us !== undefined) ch.spinMs = r.spin_us / 1000;
  return r;
}

// One exit listener for whichever agent this process has then.
let exitWatched = false;

/** Makes this process's exit read its releases written ahead (Agent.exiting). */
function watchExit() {
  if (exitWatched) return;
  exitWatched = true;
  process.on('exit', () => agent?.exiting());
}

/** The promise of every release that succeeded at once. */
const RELEASED = Promise.resolve();

let agent = null;

function getAgent() {
  if (!agent) agent = new Agent();
  return agent;
}

/** A held lock. */
// numberOf(l) is the agent's number of l, a Lock of this module still
// held, for a request's held_by; undefined otherwise.
let numberOf;

class Lock {
  static {
    numberOf = (l) => (l instanceof Lock && !l.#released && !l.#releasedSync ? l.#number : undefined);
  }
  #agent;
  #number;
  #controller = null; // made when signal is first read
  #lost = null;
  #released = null;
  #releasedSync = null; // { error }: how releaseSync ended

  #record = null; // { token, owner }, once known
  #ahead; // whether its release may be written ahead of its reply (Agent.releaseAhead)

  constructor(ag, reply) {
    this.#agent = ag;
    this.#number = reply.lock;
    this.#ahead = reply.release_ahead === true;
    /** The slot held of a semaphore ({ slots: n }), 0 to n-1; 0 for a lock. */
    this.slot = reply.slot ?? 0;
    /** The lock path (for etcd, the key). */
    this.path = reply.path;
    /** The protocol holding the lock: 'flock', 'dir', 'etcd'. */
    this.protocol = reply.protocol;
    // A lazy acquisition's reply has neither (see record).
    if (reply.owner !== undefined) this.#record = { token: reply.token ?? 0, owner: reply.owner };
  }

  /**
   * Fencing token: grows with every exclusive acquisition of this lock
   * path. Read while the lock is held: the agent writes the owner record
   * that backs it when it is first asked for (or once the lock has been
   * held a while); a lock released before either has none (0).
   */
  get token() {
    return this.#recordNow().token;
  }

  /** The owner record the agent published for this lock (null for one released before it was read or written). */
  get owner() {
    return this.#recordNow().owner;
  }

  /**
   * The token and owner record: the acquisition's reply had them, or one
   * token request on the synchronous channel asks for them (a lazy
   * acquisition is only made where that channel is open).
   */
  #recordNow() {
    if (this.#record) return this.#record;
    const ag = this.#agent;
    const live = !this.#released && !this.#releasedSync && !this.#lost && ag.sync;
    const r = live ? ag.syncRequest({ op: 'token', lock: this.#number }) : null;
    const record = r?.ok ? { token: r.token ?? 0, owner: r.owner } : { token: 0, owner: null };
    // Kept only once final: a failed ask while the lock is held (the
    // agent is dying) says nothing about what a later read would find.
    if (r?.ok || !live) this.#record = record;
    return record;
  }

  /** What JSON.stringify shows of a lock: its public properties. */
  toJSON() {
    return { token: this.token, path: this.path, protocol: this.protocol, owner: this.owner };
  }

  /** Aborts (with a HoldError 'ELOST') if the lock is lost. */
  get signal() {
    if (!this.#controller) {
      this.#controller = newAbortController();
      if (this.#lost) this.#controller.abort(this.#lost);
    }
    return this.#controller.signal;
  }

  _lose(err) {
    if (this.#lost || this.#released) return;
    this.#lost = err;
    this.#agent.locks.delete(this.#number);
    this.#agent.updateRef();
    this.#controller?.abort(err);
  }

  /** Its release, written ahead, found it lost (Agent.releaseFailed). */
  _releaseFailed(err) {
    if (this.#lost) return;
    this.#lost = err;
    this.#controller?.abort(err);
  }

  /**
   * Gives the lock up. Idempotent: later calls return the first call's
   * promise. Rejects with 'ELOST' if the lock was lost meanwhile.
   *
   * A kernel lock's release is written to the agent without waiting for
   * its reply (Linux; see releaseAhead): the lock is free for the next
   * holder as soon as the agent reads it, µs later, and the promise is
   * settled at once. Should that release find the lock lost (the agent
   * heard of the loss before this call, this process not yet), the
   * next call of this package (lock, tryLock, release, check, status,
   * update, append, or their synchronous forms) throws that 'ELOST';
   * one that comes as the process exits is printed on stderr.
   */
  release() {
    if (this.#released) return this.#released;
    this.#letGo();
    const failed = this.#released === RELEASED ? this.#agent.takeFailed() : null;
    if (failed) {
      this.#released = Promise.reject(failed);
      this.#released.catch(() => {});
    }
    return this.#released;
  }

  /**
   * Gives the lock back for a call that throws another error (fn's, or a
   * failure of an earlier release written ahead): its own release's
   * failure is ignored, and no other failure taken. On the synchronous
   * channel the release is done when this returns.
   */
  _giveBack() {
    if (!this.#released) this.#letGo();
    return this.#released.catch(() => {});
  }

  /** The body of release(), without the throwing of failures written ahead: sets #released. */
  #letGo() {
    if (this.#lost) {
      this.#released = Promise.reject(this.#lost);
      this.#released.catch(() => {});
      return;
    }
    const ag = this.#agent;
    if (ag.sync && this.#ahead) {
      if (ag.releaseAhead(this, this.#number)) {
        ag.locks.delete(this.#number);
        ag.updateRef();
        this.#releasedSync = { error: null };
        this.#released = RELEASED;
        return;
      }
      // The channel broke: the agent is dead, which lost the lock.
      this.#releasedSync = { error: this.#lost ?? ag.dead };
      this.#released = Promise.reject(this.#releasedSync.error);
      this.#released.catch(() => {});
      return;
    }
    if (ag.sync) {
      const reply = ag.syncRequest({ op: 'release', lock: this.#number, queue: true });
      if (reply?.queued) {
        // The agent queued it (for instance a network lock, which its
        // sub-agent holds): the reply comes on the standard channel.
        this.#released = this.#releasing(ag, ag.expect(reply.id));
        return;
      }
      ag.locks.delete(this.#number);
      ag.updateRef();
      this.#releasedSync = { error: reply?.ok ? null : (reply ? fromReply(reply.error) : this.#lost) };
      if (reply?.ok) {
        this.#released = RELEASED;
      } else {
        // reply is null when the agent died, which lost the lock.
        this.#released = Promise.reject(reply ? fromReply(reply.error) : this.#lost);
        this.#released.catch(() => {});
      }
      return;
    }
    this.#released = this.#releasing(ag, ag.request({ op: 'release', lock: this.#number }));
  }

  /** The promise of a release whose reply p is to come on the standard channel. */
  #releasing(ag, p) {
    return p.then(
      () => {},
      (err) => {
        throw err.code === 'EAGENT' ? new HoldError('ELOST', `lock ${this.path} lost: ${err.message}`) : err;
      },
    ).finally(() => {
      ag.locks.delete(this.#number);
      ag.updateRef();
    });
  }

  /**
   * Gives the lock up, synchronously; idempotent. Throws 'ELOST' if the
   * lock was lost meanwhile, as release() rejects.
   */
  releaseSync() {
    if (this.#releasedSync) {
      if (this.#releasedSync.error) throw this.#releasedSync.error;
      return;
    }
    if (this.#lost) {
      this.#releasedSync = { error: this.#lost };
      throw this.#lost;
    }
    if (this.#released) return; // an async release is on its way
    const ag = this.#agent;
    ag.openSyncNow('releaseSync');
    if (this.#ahead) {
      this.#letGo(); // written ahead, as release() does
      if (this.#releasedSync.error) throw this.#releasedSync.error;
      const failed = ag.takeFailed();
      if (failed) throw failed;
      return;
    }
    const reply = ag.syncRequest({ op: 'release', lock: this.#number });
    ag.locks.delete(this.#number);
    ag.updateRef();
    // reply is null when the agent died, which lost the lock.
    const error = reply?.ok ? null : (reply ? fromReply(reply.error) : this.#lost ?? ag.dead);
    this.#releasedSync = { error };
    this.#released = error ? Promise.reject(error) : Promise.resolve();
    this.#released.catch(() => {});
    if (error) throw error;
  }

  /** Returns while the lock is held; throws 'ELOST' otherwise (checkSync of check()). */
  checkSync() {
    if (this.#lost) throw this.#lost;
    if (this.#released) throw new HoldError('ELOST', `lock ${this.path} was released`);
    const ag = this.#agent;
    ag.openSyncNow('checkSync');
    const reply = ag.syncRequest({ op: 'check', lock: this.#number });
    if (reply?.ok) {
      ag.throwFailed();
      return;
    }
    const err = reply ? fromReply(reply.error) : this.#lost ?? ag.dead;
    if (err.code === 'ELOST') this._lose(err);
    throw err;
  }

  /** Resolves while the lock is held; rejects with 'ELOST' otherwise. */
  async check() {
    if (this.#lost) throw this.#lost;
    if (this.#released) throw new HoldError('ELOST', `lock ${this.path} was released`);
    const ag = this.#agent;
    let reply;
    try {
      if (ag.sync) {
        const r = ag.syncRequest({ op: 'check', lock: this.#number, queue: true });
        reply = r === null ? { ok: false, error: this.#lost ?? ag.dead } : r.queued ? await ag.expect(r.id) : r;
      } else {
        reply = await ag.request({ op: 'check', lock: this.#number });
      }
    } catch (err) {
      reply = { ok: false, error: err };
    }
    if (reply.ok) {
      ag.throwFailed();
      return;
    }
    const err = reply.error instanceof HoldError ? reply.error : fromReply(reply.error);
    if (err.code === 'ELOST') this._lose(err);
    throw err;
  }
}

// The options each function takes.
const LOCK_OPTIONS = new Set(['wait', 'signal', 'shared', 'fair', 'protocol', 'lockFile', 'name', 'fields', 'settings', 'stale', 'makeDirs', 'slots',
  'deadlockAfter', 'heldBy', 'heartbeat', 'lostIfTouched']);
const APPEND_OPTIONS = new Set([...LOCK_OPTIONS].filter((o) => o !== 'shared' && o !== 'slots').concat('mustExist'));
const UPDATE_OPTIONS = new Set([...APPEND_OPTIONS, 'encoding', 'allowSplit', 'allowOwnerChange', 'allowEmpty']);
const STATUS_OPTIONS = new Set(['protocol', 'lockFile', 'name', 'settings', 'stale']);

/** Checks opts and turns them into the request's fields. */
function requestOptions(target, opts = {}, allowed = LOCK_OPTIONS) {
  if (target !== undefined && target !== null && typeof target !== 'string') {
    throw new HoldError('EINVAL', `target must be a string (a path or an etcd:// address), not ${typeof target}`);
  }
  if (opts === null || typeof opts !== 'object') {
    throw new HoldError('EINVAL', `options must be an object, not ${opts === null ? 'null' : typeof opts}`);
  }
  for (const key of Object.keys(opts)) {
    if (!allowed.has(key) && allowed.has('mustExist') && (key === 'shared' || key === 'slots')) {
      // update and append: what would let another holder in beside them.
      // Said why, as hold update and hold append say it, rather than
      // "unknown": two updates under a shared lock or two slots read the
      // same old content, and one change is lost.
      throw new HoldError('EINVAL', `option ${JSON.stringify(key)} does not apply: update and append need the file's lock alone, ` +
        `and ${key === 'shared' ? 'a shared lock' : 'one of several slots'} lets other holders in beside them, so that one change would be lost; ` +
        'leave it out (they always take the lock exclusively)');
    }
    if (!allowed.has(key)) {
      throw new HoldError('EINVAL', `unknown option ${JSON.stringify(key)} (known: ${[...allowed].join(', ')})`);
    }
  }
  const req = { target: target ?? '' };
  if (opts.wait !== undefined && opts.wait !== null) {
    if (typeof opts.wait !== 'number' || !(opts.wait >= 0) || opts.wait === Infinity) {
      throw new HoldError('EINVAL', `wait must be a number of seconds >= 0 (omit it to wait as long as it takes), not ${String(opts.wait)}`);
    }
    req.wait = opts.wait;
  }
  if (opts.slots !== undefined) {
    if (!Number.isInteger(opts.slots)) throw new HoldError('EINVAL', `slots must be a whole number of slots, not ${String(opts.slots)}`);
    req.slots = opts.slots;
  }
  if (opts.deadlockAfter !== undefined) {
    if (typeof opts.deadlockAfter !== 'number' || !(opts.deadlockAfter >= 0) || opts.deadlockAfter === Infinity) {
      throw new HoldError('EINVAL', `deadlockAfter must be a number of seconds >= 0 (0: never look for a deadlock), not ${String(opts.deadlockAfter)}`);
    }
    req.deadlock_after = opts.deadlockAfter;
  }
  if (opts.heldBy !== undefined) {
    if (!Array.isArray(opts.heldBy) || opts.heldBy.some((l) => !(l instanceof Lock))) {
      throw new HoldError('EINVAL', 'heldBy must be an array of the locks (from lock(), lockSync(), ...) this call keeps while it waits');
    }
    // A lock released already keeps nothing.
    const held = opts.heldBy.map(numberOf).filter((n) => n !== undefined);
    if (held.length > 0) req.held_by = held;
  }
  if (opts.stale !== undefined) {
    if (typeof opts.stale !== 'number' || !(opts.stale > 0) || opts.stale === Infinity) {
      throw new HoldError('EINVAL', `stale must be a number of seconds > 0, not ${String(opts.stale)}`);
    }
    req.stale = opts.stale;
  }
  if (opts.heartbeat !== undefined) {
    if (typeof opts.heartbeat !== 'number' || !(opts.heartbeat > 0) || opts.heartbeat === Infinity) {
      throw new HoldError('EINVAL', `heartbeat must be a number of seconds > 0, not ${String(opts.heartbeat)}`);
    }
    req.heartbeat = opts.heartbeat;
  }
  for (const [key, field] of [
    ['shared', 'shared'], ['fair', 'fair'], ['mustExist', 'must_exist'],
    ['allowSplit', 'allow_split'], ['allowOwnerChange', 'allow_owner_change'],
    ['allowEmpty', 'allow_empty'], ['makeDirs', 'make_dirs'], ['lostIfTouched', 'lost_if_touched'],
  ]) {
    if (opts[key] !== undefined) {
      if (typeof opts[key] !== 'boolean') throw new HoldError('EINVAL', `${key} must be true or false`);
      req[field] = opts[key];
    }
  }
  for (const [key, field] of [['protocol', 'protocol'], ['lockFile', 'lock_file'], ['name', 'name']]) {
    if (opts[key] !== undefined) {
      if (typeof opts[key] !== 'string' || opts[key] === '') throw new HoldError('EINVAL', `${key} must be a non-empty string`);
      req[field] = opts[key];
    }
  }
  for (const key of ['fields', 'settings']) {
    if (opts[key] !== undefined) {
      const obj = opts[key];
      if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) throw new HoldError('EINVAL', `${key} must be an object of strings`);
      const out = {};
      for (const [k, v] of Object.entries(obj)) {
        if (typeof v !== 'string' && typeof v !== 'number' && typeof v !== 'boolean') {
          throw new HoldError('EINVAL', `${key}.${k} must be a string`);
        }
        out[k] = String(v);
      }
      req[key] = out;
    }
  }
  if (opts.signal !== undefined && !isAbortSignal(opts.signal)) {
    throw new HoldError('EINVAL', 'signal must be an AbortSignal');
  }
  return req;
}

function abortError(what, signal) {
  const reason = signal.reason instanceof Error ? `: ${signal.reason.message}` : '';
  return new HoldError('EABORT', `${what} aborted before it began${reason}`);
}

/**
 * Sends a request that may wait, cancelling the wait when signal aborts.
 * Resolves with the reply.
 */
function waitingRequest(ag, msg, signal) {
  if (!signal) return ag.request(msg);
  let id;
  const p = ag.request(msg, (sent) => { id = sent; });
  return id === undefined ? p : cancelOnAbort(ag, p, id, signal); // undefined: not sent (the agent died)
}

/**
 * Returns p (the reply to request id, pending) after arranging that
 * signal's abort cancels the request's wait.
 */
function cancelOnAbort(ag, p, id, signal) {
  if (!signal) return p;
  const onAbort = () => ag.send({ op: 'cancel', request: id });
  if (signal.aborted) onAbort();
  else signal.addEventListener('abort', onAbort, { once: true });
  const done = () => signal.removeEventListener('abort', onAbort);
  p.then(done, done);
  return p;
}

async function takeLock(op, target, opts = {}) {
  const req = requestOptions(target, opts);
  const what = `${op === 'try' ? 'tryLock' : 'lock'}(${JSON.stringify(target ?? opts.name ?? opts.lockFile ?? '')})`;
  if (opts.signal?.aborted) throw abortError(what, opts.signal);
  const ag = getAgent();
  await ag.ready;
  // Lazy (no token or record in the reply) where the synchronous channel
  // can fetch them when read.
  const reply = ag.sync
    ? await ag.queueable({ op, ...req, lazy: true }, opts.signal)
    : await waitingRequest(ag, { op, ...req }, opts.signal);
  const lock = new Lock(ag, reply);
  ag.locks.set(reply.lock, lock);
  ag.updateRef();
  const failed = ag.takeFailed();
  if (failed) {
    // A release written ahead failed: this call throws it (Lock.release).
    await lock._giveBack();
    throw failed;
  }
  if (opts.signal?.aborted) {
    // Granted just as the caller gave up: they will not release it.
    await lock._giveBack();
    throw new HoldError('EABORT', `${what} aborted`);
  }
  return lock;
}

/**
 * Takes the lock on target ("<target>.lock", or opts.lockFile, opts.name,
 * an etcd:// address), waiting as opts.wait says (seconds; omitted: as long
 * as it takes; 0: not at all).
 */
function lock(target, opts) {
  return takeLock('acquire', target, opts);
}

/** Takes the lock if it is free; rejects with 'EBUSY' naming the holder otherwise. */
function tryLock(target, opts) {
  return takeLock('try', target, opts);
}

/**
 * The error of withLock, update and their Sync forms called without a
 * function second: it says the order they take, and, when the options came
 * second and the function third (withLock(t, {timeout}, fn)), that the two
 * are the wrong way round.
 */
function needsFunction(name, first, what, fn, opts) {
  const order = `${name}(${first}, fn, opts): the function comes second, the options third`;
  if (typeof opts === 'function') {
    return `${name} needs ${what} second, and got the options there and the function third; call it as ${order}`;
  }
  return `${name} needs ${what}, got ${fn === null ? 'null' : typeof fn}; call it as ${order}`;
}

/**
 * Runs fn(lock) under the lock and releases it whatever fn does. Returns
 * fn's result; if fn succeeded but the lock was lost, rejects with 'ELOST'.
 */
async function withLock(target, fn, opts) {
  if (typeof fn !== 'function') throw new HoldError('EINVAL', needsFunction('withLock', 'target', 'a function to run under the lock', fn, opts));
  const l = await lock(target, opts);
  let result;
  try {
    result = await fn(l);
  } catch (err) {
    // fn's error wins; a failure of an earlier release written ahead
    // is left for the next call, not swallowed here.
    await l._giveBack();
    throw err;
  }
  await l.release();
  return result;
}

function toBytes(data, what) {
  if (typeof data === 'string') return Buffer.from(data, 'utf8');
  if (data instanceof Uint8Array) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  throw new HoldError('EINVAL', `${what} must be a string, Buffer or Uint8Array, not ${data === null ? 'null' : typeof data}`);
}

/**
 * Changes the file under its lock ("<file>.lock" unless opts.lockFile or
 * opts.name): fn gets the old content (a string, or a Buffer with
 * opts.encoding 'buffer'; empty if the file does not exist, unless
 * opts.mustExist) and returns the new, which replaces the file atomically,
 * as `hold update` does. Nothing is written if fn throws (its error is
 * rethrown) or returns the old content. Resolves with whether the file was
 * written. Empty content ('' or an empty Buffer) is refused with 'EIO'
 * and the file left as it was, unless opts.allowEmpty: then it empties
 * the file.
 *
 * A file with other hard links (opts.allowSplit accepts it) or one whose
 * owner or group cannot be kept (opts.allowOwnerChange) is refused with
 * 'EACCES' before fn runs. What the agent warns about once the file is
 * replaced (an owner changed, a directory not synced) is emitted as a
 * process warning of type 'HoldWarning': Node prints it on stderr, as
 * `hold update` would, and process.on('warning') sees it.
 */
async function update(file, fn, opts = {}) {
  if (typeof fn !== 'function') throw new HoldError('EINVAL', needsFunction('update', 'file', 'a function from the old content to the new', fn, opts));
  const req = requestOptions(file, opts, UPDATE_OPTIONS);
  const encoding = opts.encoding ?? 'utf8';
  if (encoding !== 'utf8' && encoding !== 'buffer') throw new HoldError('EINVAL', `encoding must be 'utf8' or 'buffer', not ${JSON.stringify(encoding)}`);
  if (opts.signal?.aborted) throw abortError(`update(${JSON.stringify(file)})`, opts.signal);
  const ag = getAgent();
  ag.throwFailed();
  const reply = await waitingRequest(ag, { op: 'update', ...req }, opts.signal);
  const old = Buffer.from(reply.data ?? '', 'base64');
  let data;
  // The agent holds the lock while fn runs: keep it referenced.
  ag.busy++;
  ag.updateRef();
  try {
    const out = await fn(encoding === 'buffer' ? old : old.toString('utf8'));
    if (out === undefined || out === null) {
      throw new HoldError('EINVAL', 'the update function returned nothing: return the new content (a string or Buffer), or throw to write nothing');
    }
    data = toBytes(out, 'the update function\'s result');
  } catch (err) {
    await ag.request({ op: 'abort', update: reply.update }).catch(() => {});
    throw err;
  } finally {
    ag.busy--;
    ag.updateRef();
  }
  const done = await ag.request({ op: 'commit', update: reply.update, data: data.toString('base64') });
  // Not an error: the file is replaced, and a caller that retried would
  // apply its change twice.
  if (done.warning) process.emitWarning(done.warning, { type: 'HoldWarning', code: 'HOLD_UPDATE' }); // it names the file
  return Boolean(done.written);
}

/**
 * Appends data to the file under its lock: one write and an fsync, so
 * concurrent appenders never interleave.
 */
async function append(file, data, opts = {}) {
  const req = requestOptions(file, opts, APPEND_OPTIONS);
  req.data = toBytes(data, 'data').toString('base64');
  if (opts.signal?.aborted) throw abortError(`append(${JSON.stringify(file)})`, opts.signal);
  const ag = getAgent();
  ag.throwFailed();
  await waitingRequest(ag, { op: 'append', ...req }, opts.signal);
}

/**
 * Reports the lock's state without taking it: { lock_file, protocol,
 * state, held, token, holder, ... }, as `hold status --json` prints it.
 */
async function status(target, opts = {}) {
  const req = requestOptions(target, opts, STATUS_OPTIONS);
  const ag = getAgent();
  ag.throwFailed();
  const reply = await ag.request({ op: 'status', ...req });
  return reply.status;
}

// The synchronous API. Every call blocks its thread until done: a wait
// sleeps in a read of the agent's synchronous channel. Same options,
// errors and agent as the async forms, except signal: nothing can abort a
// wait that blocks the only thread that could, so `wait` bounds it
// instead. A wait for a lock that this process holds (through either API)
// fails at once with 'EDEADLK': blocked, it could never release it.

const SYNC_LOCK_OPTIONS = without(LOCK_OPTIONS, 'signal');
const SYNC_APPEND_OPTIONS = without(APPEND_OPTIONS, 'signal');
const SYNC_UPDATE_OPTIONS = without(UPDATE_OPTIONS, 'signal');

function without(set, name) {
  return new Set([...set].filter((o) => o !== name));
}

/** Checks opts for a synchronous call, explaining a signal's absence. */
function syncOptions(target, opts, allowed, what) {
  if (opts && typeof opts === 'object' && opts.signal !== undefined) {
    throw new HoldError('EINVAL', `${what} blocks its thread, so no signal can abort its wait: bound it with the wait option, or use the async form`);
  }
  return requestOptions(target, opts, allowed);
}

/** The agent, with its synchronous channel open. */
function syncAgent(what) {
  const ag = getAgent();
  ag.openSyncNow(what);
  return ag;
}

/**
 * Sends msg on the synchronous channel; returns the reply, throws its
 * error. A failure of a release written ahead that comes with the reply
 * is left for the caller to throw (after giving back a lock taken), or
 * for the next call.
 */
function syncCall(ag, msg) {
  const r = ag.syncRequest(msg);
  if (r === null) throw ag.dead;
  if (!r.ok) throw fromReply(r.error);
  return r;
}

function takeLockSync(op, target, opts = {}) {
  const what = `${op === 'try' ? 'tryLockSync' : 'lockSync'}(${JSON.stringify(target ?? opts?.name ?? opts?.lockFile ?? '')})`;
  const req = syncOptions(target, opts, SYNC_LOCK_OPTIONS, what);
  const ag = syncAgent(what);
  const reply = syncCall(ag, { op, ...req, lazy: true });
  const lock = new Lock(ag, reply);
  ag.locks.set(reply.lock, lock);
  const failed = ag.takeFailed();
  if (failed) {
    // A release written ahead failed: this call throws it (Lock.release).
    lock._giveBack();
    throw failed;
  }
  return lock;
}

/** lock(), synchronously: blocks until the lock is held (or opts.wait runs out). */
function lockSync(target, opts) {
  return takeLockSync('acquire', target, opts);
}

/** tryLock(), synchronously: the lock if free; throws 'EBUSY' naming the holder otherwise. */
function tryLockSync(target, opts) {
  return takeLockSync('try', target, opts);
}

function isThenable(x) {
  return x !== null && (typeof x === 'object' || typeof x === 'function') && typeof x.then === 'function';
}

/**
 * Runs fn(lock) under the lock, synchronously, and releases it whatever fn
 * does. Returns fn's result; throws 'ELOST' if fn succeeded but the lock
 * was lost. fn must be synchronous: a promise it returned would outlive
 * the lock (use withLock).
 */
function withLockSync(target, fn, opts) {
  if (typeof fn !== 'function') throw new HoldError('EINVAL', needsFunction('withLockSync', 'target', 'a function to run under the lock', fn, opts));
  const l = lockSync(target, opts);
  let result;
  try {
    result = fn(l);
  } catch (err) {
    l._giveBack(); // as withLock does
    throw err;
  }
  l.releaseSync();
  if (isThenable(result)) {
    result.then(null, () => {}); // its outcome is no longer ours to report
    throw new HoldError('EINVAL', 'the function given to withLockSync returned a promise, which would run on without the lock (released already): use withLock for async functions');
  }
  return result;
}

/**
 * update(), synchronously: fn gets the old content and returns the new
 * (synchronously). Returns whether the file was written.
 */
function updateSync(file, fn, opts = {}) {
  const what = `updateSync(${JSON.stringify(file)})`;
  if (typeof fn !== 'function') throw new HoldError('EINVAL', needsFunction('updateSync', 'file', 'a function from the old content to the new', fn, opts));
  const req = syncOptions(file, opts, SYNC_UPDATE_OPTIONS, what);
  const encoding = opts.encoding ?? 'utf8';
  if (encoding !== 'utf8' && encoding !== 'buffer') throw new HoldError('EINVAL', `encoding must be 'utf8' or 'buffer', not ${JSON.stringify(encoding)}`);
  const ag = syncAgent(what);
  ag.throwFailed();
  const reply = syncCall(ag, { op: 'update', ...req });
  const old = Buffer.from(reply.data ?? '', 'base64');
  let data;
  try {
    const out = fn(encoding === 'buffer' ? old : old.toString('utf8'));
    if (isThenable(out)) {
      out.then(null, () => {});
      throw new HoldError('EINVAL', 'the function given to updateSync returned a promise: return the new content itself, or use update for async functions');
    }
    if (out === undefined || out === null) {
      throw new HoldError('EINVAL', 'the update function returned nothing: return the new content (a string or Buffer), or throw to write nothing');
    }
    data = toBytes(out, 'the update function\'s result');
  } catch (err) {
    ag.syncRequest({ op: 'abort', update: reply.update });
    throw err;
  }
  const done = syncCall(ag, { op: 'commit', update: reply.update, data: data.toString('base64') });
  if (done.warning) process.emitWarning(done.warning, { type: 'HoldWarning', code: 'HOLD_UPDATE' });
  return Boolean(done.written);
}

/** append(), synchronously. */
function appendSync(file, data, opts = {}) {
  const what = `appendSync(${JSON.stringify(file)})`;
  const req = syncOptions(file, opts, SYNC_APPEND_OPTIONS, what);
  req.data = toBytes(data, 'data').toString('base64');
  const ag = syncAgent(what);
  ag.throwFailed();
  syncCall(ag, { op: 'append', ...req });
}

/** status(), synchronously. */
function statusSync(target, opts = {}) {
  const req = requestOptions(target, opts, STATUS_OPTIONS);
  const ag = syncAgent(`statusSync(${JSON.stringify(target)})`);
  ag.throwFailed();
  return syncCall(ag, { op: 'status', ...req }).status;
}

module.exports = {
  HoldError, lock, tryLock, withLock, update, append, status,
  lockSync, tryLockSync, withLockSync, updateSync, appendSync, statusSync,
};
