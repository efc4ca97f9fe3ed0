// AbortController and AbortSignal where the realm has none.
//
// Node has both as globals since 15, but a realm may lack them: Node 14,
// and Jest's node environment before 26, which runs tests in a context of
// its own with a fixed list of globals. The package must load and work
// there, so it never names either global unguarded: a lock's `signal` is
// a real AbortSignal where one exists, and otherwise a small object with
// AbortSignal's interface (aborted, reason, onabort, addEventListener,
// removeEventListener, throwIfAborted); the `signal` option accepts any
// object with that interface, from this realm or another (an AbortSignal
// made outside a Jest test's context is not an instance of the one
// inside, where there is one).

'use strict';

/** A signal with AbortSignal's interface, for realms without one. */
class FallbackAbortSignal {
  #listeners = [];

  constructor() {
    /** Whether abort() was called. */
    this.aborted = false;
    /** What abort() was given. */
    this.reason = undefined;
    /** Called with the abort event, like AbortSignal's onabort. */
    this.onabort = null;
  }

  /** Calls fn({ type: 'abort', target }) on abort; { once } is honoured. */
  addEventListener(type, fn, opts) {
    if (type !== 'abort' || typeof fn !== 'function') return;
    if (this.#listeners.some((l) => l.fn === fn)) return;
    this.#listeners.push({ fn, once: Boolean(opts && typeof opts === 'object' && opts.once) });
  }

  /** Forgets fn. */
  removeEventListener(type, fn) {
    if (type !== 'abort') return;
    this.#listeners = this.#listeners.filter((l) => l.fn !== fn);
  }

  /** Throws the reason if aborted. */
  throwIfAborted() {
    if (this.aborted) throw this.reason;
  }

  _abort(reason) {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const event = { type: 'abort', target: this };
    const listeners = this.#listeners;
    this.#listeners = listeners.filter((l) => !l.once);
    if (typeof this.onabort === 'function') report(() => this.onabort(event));
    for (const l of listeners) report(() => l.fn.call(this, event));
  }
}

/** Runs fn; an exception it throws is reported as uncaught, as EventTarget does, without stopping the other listeners. */
function report(fn) {
  try {
    fn();
  } catch (err) {
    process.nextTick(() => { throw err; });
  }
}

/** An AbortController for realms without one. */
class FallbackAbortController {
  constructor() {
    this.signal = new FallbackAbortSignal();
  }

  abort(reason) {
    this.signal._abort(reason === undefined ? new Error('This operation was aborted') : reason);
  }
}

/** A new AbortController: the realm's own where it has one. */
function newAbortController() {
  return typeof AbortController === 'function' ? new AbortController() : new FallbackAbortController();
}

/** Whether x has AbortSignal's interface (from any realm). */
function isAbortSignal(x) {
  if (typeof AbortSignal === 'function' && x instanceof AbortSignal) return true;
  return x !== null && typeof x === 'object' && typeof x.aborted === 'boolean'
    && typeof x.addEventListener === 'function' && typeof x.removeEventListener === 'function';
}

module.exports = { newAbortController, isAbortSignal };
