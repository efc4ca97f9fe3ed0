"""Cross-process locks on the kernel's own file locks, served by ``hold agent``.

::

    import hold

    with hold.lock("data/tracker.md", timeout=5) as l:
        ...  # only one process at a time, in any language, runs this

The lock of a target is the file ``<target>.lock`` beside it, the one that
flock(1), ``hold run``, filelock and the Node package use for the same
path. A crash of the holder frees it at once; every acquisition gets a
fencing token (``l.token``); errors name the holder.

One ``hold agent`` process per Python process holds the locks; see
``_agent.py`` for how it is reached. A free kernel lock that the agent
says may be taken here is taken in this process (``_inproc.py``).
"""

from __future__ import annotations

import json
import math
import os
import threading
import warnings


class _LazyAsyncio:
    """asyncio, imported on first use: it is most of this package's import
    time, and a program that takes its locks from threads never needs it."""

    def __getattr__(self, name: str) -> Any:
        import asyncio as module

        globals()["asyncio"] = module
        return getattr(module, name)


asyncio: Any = _LazyAsyncio()
from typing import Any, Callable, Dict, Generator, List, Mapping, Optional, Tuple, Union

from . import _agent, _errors, _inproc
from ._agent import Agent, Reply, Request, decode, encode, get_agent
from ._errors import (
    Aborted, AgentError, Busy, Deadlock, Foreign, HoldError, HoldWarning, Invalid, IsADirectory, Lost, NoSpace,
    NotFound, NotRegular, PermissionDenied, ReadOnly, Timeout, from_reply,
)
from ._owner import Owner
from ._steps import Steps, arun, run
from ._version import __version__

__all__ = [
    "lock",
    "try_lock",
    "alock",
    "update",
    "append",
    "status",
    "aupdate",
    "aappend",
    "astatus",
    "Lock",
    "Owner",
    *_errors.__all__,
    "__version__",
]

PathLike = Union[str, "os.PathLike[str]"]


class Lock:
    """A held lock. A context manager: leaving the ``with`` block releases it.

    Attributes: ``token`` (the fencing token: strictly increases with every
    exclusive acquisition of this lock path), ``path`` (the lock path; for
    etcd, the key), ``protocol`` (``"flock"``, ``"dir"`` or ``"etcd"``) and
    ``owner`` (the owner record published for this lock, as ``hold status``
    shows it).

    Re-entrant in its thread, as filelock's locks are: a ``with`` block on
    a Lock that a ``with`` of the same thread has entered counts up, its end
    counts down, and the lock is released when the outermost block ends.
    """

    def __init__(self, agent: Agent, reply: Reply, thread: Optional[int] = None) -> None:
        self._agent = agent
        # The thread that took it, which cannot release it while it waits
        # for another lock (None for alock(): the tasks of an event loop
        # may release locks for one another).
        self._thread = thread
        self._depth = 0  # with blocks entered and not left
        self._number: int = reply["lock"]
        self._mu = threading.Lock()
        self._lost: Optional[HoldError] = None
        self._released = False
        # The fencing token, None until known: a lazy acquisition's reply
        # has neither it nor the owner record (see token).
        self._token: Optional[int] = (
            int(reply.get("token") or 0) if "owner" in reply or _agent.OWNER_RAW in reply else None
        )
        #: The slot held of a semaphore (``slots=n``), 0 to n-1; 0 for a lock.
        self.slot: int = int(reply.get("slot") or 0)
        self.path: str = str(reply.get("path", ""))
        self.protocol: str = str(reply.get("protocol", ""))
        # Whether the agent lets its release be written ahead of the reply
        # (see release()).
        self._ahead = bool(reply.get("release_ahead"))
        # A reply of the synchronous channel keeps the record undecoded
        # (_agent.OWNER_RAW): most locks never read it, and decoding it
        # was most of the cost of parsing the reply.
        self._owner: Optional[Owner] = reply.get("owner")
        self._owner_raw: Optional[bytes] = reply.get(_agent.OWNER_RAW)
        # A lock taken in this process with a recipe of the agent's
        # (_inproc), not held by the agent (_number is then 0).
        self._held: Optional[_inproc.Held] = None

    @property
    def token(self) -> int:
        """The fencing token: strictly increases with every exclusive
        acquisition of this lock path. Read it while the lock is held: the
        agent writes the owner record that backs it when it is first asked
        for (one request of a few µs on the synchronous channel), or once
        the lock has been held a while (10 to 60 ms); a lock released
        before either has none (0), and its owner is empty."""
        if self._token is None:
            self._fetch_record()
        return self._token or 0

    def _fetch_record(self) -> None:
        """Asks the agent for the token and owner record of a lock taken
        lazily (Agent.lazy). Kept once final: a failed ask while the lock
        is held (its agent is dying) says nothing of what a later read
        would find."""
        if self._held is not None:
            self._fetch_inproc_record()
            return
        ag = self._agent
        live = not self._released and self._lost is None and not self._foreign() and ag.sync is not None
        reply: Optional[Reply] = None
        if live:
            msg = {"op": "token", "lock": self._number}
            try:
                reply = ag.sync_call(msg)
                if reply is not None and reply.get("queued"):
                    reply = ag.call(msg, queued=int(reply["id"]))
            except HoldError:
                reply = None
        if reply is not None and reply.get("ok"):
            self._token = int(reply.get("token") or 0)
            owner = reply.get("owner")
            if self._owner is None and self._owner_raw is None:
                self._owner = owner if isinstance(owner, dict) else {}
        elif not live:
            self._token = 0
            if self._owner is None and self._owner_raw is None:
                self._owner = {}

    def _fetch_inproc_record(self) -> None:
        """_fetch_record for a lock taken in this process: the agent writes
        its record on its behalf while it holds the lock (under _mu, which
        its release takes first)."""
        held = self._held
        assert held is not None
        with self._mu:
            if self._token is not None:
                return
            reply: Optional[Reply] = None
            if not self._released and self._lost is None and not self._foreign():
                msg = {"op": "inproc_record", **held.recipe.file(), "ticket": held.recipe.ticket, "started_ns": held.started}
                try:
                    reply = get_agent().sync_call(msg)
                except HoldError:
                    reply = None
                if reply is not None and not reply.get("ok"):
                    err = from_reply(reply.get("error"))
                    if isinstance(err, Lost):
                        self._lost = err
                    reply = None
            if reply is None:
                self._token, self._owner = 0, {}
                return
            held.record = str(reply.get("data") or "")
            held.token = int(reply.get("token") or 0)
            self._token = held.token
            owner = reply.get("owner")
            self._owner = owner if isinstance(owner, dict) else {}

    def _check_inproc(self) -> None:
        """check() for a lock taken in this process: whether its
        descriptor still holds it (_inproc.gone), and, asked of the agent,
        whether its lock file still has its name."""
        held = self._held
        assert held is not None
        why = _inproc.gone(held)
        if why is not None:
            self._lose(Lost(f"lock {self.path} lost: {why}"))
            if self._lost is not None:
                raise self._lost
        reply = get_agent().sync_call({"op": "inproc_check", **held.recipe.file()})
        if reply is not None and not reply.get("ok"):
            err = from_reply(reply.get("error"))
            if isinstance(err, Lost):
                self._lose(err)
                raise self._lost or err
            raise err

    @property
    def owner(self) -> Owner:
        """The owner record published for this lock, as ``hold status``
        shows it (decoded at the first read; keys as in ``Owner``; empty
        for a lock released before its token or record was read, see
        ``token``)."""
        if self._owner is None and self._owner_raw is None and self._token is None:
            self._fetch_record()
        if self._owner is None:
            owner = None
            if self._owner_raw is not None:
                try:
                    owner = json.loads(self._owner_raw)
                except ValueError:
                    pass
            self._owner = owner if isinstance(owner, dict) else {}
            self._owner_raw = None
        return self._owner

    @owner.setter
    def owner(self, value: Owner) -> None:
        self._owner, self._owner_raw = value, None

    def __repr__(self) -> str:
        state = "released" if self._released else "lost" if self._lost else "held"
        token = "unread" if self._token is None else self._token  # reading it would ask the agent
        return f"<hold.Lock {self.path!r} token={token} protocol={self.protocol!r} {state}>"

    @property
    def lost(self) -> Optional[HoldError]:
        """Why the lock was lost (a ``Lost``), or None while it is held or
        after a normal release. Set when the agent reports it; ``check()``
        asks at once (and so does reading it, for a lock taken in this
        process, which the agent does not watch)."""
        if self._held is not None and self._lost is None and not self._released and not self._foreign():
            try:
                self._check_inproc()
            except HoldError:
                pass
        return self._lost

    def _lose(self, err: HoldError) -> None:
        with self._mu:
            if self._lost is not None or self._released:
                return
            self._lost = err

    def _foreign(self) -> bool:
        # In a child made by fork(), the lock is still the parent's: it
        # belongs to the parent's agent, which the child must not use.
        return self._agent.pid != _agent.pid

    def release(self) -> None:
        """Gives the lock up. Idempotent: later calls do nothing. Raises
        ``Lost`` if the lock is known lost. In a child process made by
        fork() it does nothing: the lock is the parent's.

        A kernel lock's release on the synchronous channel is written to
        the agent and not waited for (the agent says which locks may be so
        released): it is in the agent's input when this returns, so it
        comes before anything this process asks next, and the next call
        reads its outcome. A release that failed (the lock was lost
        while held) is raised by that next call as ``Lost``, and recorded
        as this lock's ``lost``; at exit, it is warned of."""
        msg = self._release_start()
        if msg is not None:
            run(self._release_waited(msg), _perform)

    async def _arelease(self) -> None:
        """release(), awaiting a reply that comes on the standard channel."""
        msg = self._release_start()
        if msg is not None:
            await arun(self._release_waited(msg), _aperform)

    def _release_start(self) -> Optional[Dict[str, Any]]:
        """Releases the lock, or returns the release to send and wait for
        on the standard channel."""
        with self._mu:
            if self._released or self._foreign():
                return None
            self._released = True
            lost = self._lost
            held = self._held
        if held is not None:
            why = _inproc.gone(held) if lost is None else None
            self._let_go(held)
            if why is not None:
                # Lost before the release: said as check() says it.
                with self._mu:
                    lost = self._lost = Lost(f"lock {self.path} lost: {why}")
            if lost is not None:
                raise lost
            return None
        ag = self._agent
        with ag.mu:
            ag.locks.pop(self._number, None)
        if lost is not None:
            raise lost
        if self._ahead and ag.release_later(self):
            ag.raise_failed()
            return None
        if ag.dead is not None:
            raise Lost(f"lock {self.path} lost: {ag.dead}")
        return {"op": "release", "lock": self._number}

    def _let_go(self, held: "_inproc.Held") -> None:
        """Releases a lock taken in this process: the record the agent
        wrote for it, if any, is erased first, while it is still held."""
        try:
            if held.record:
                msg = {"op": "inproc_erase", **held.recipe.file(), "record_token": held.token, "data": held.record}
                try:
                    get_agent().sync_call(msg)
                except HoldError:
                    pass  # the next holder overwrites a record left behind
        finally:
            _inproc.let_go(held)

    def _release_waited(self, msg: Dict[str, Any]) -> "Steps[None]":
        try:
            yield _Call(self._agent, msg)
        except AgentError as e:
            raise Lost(f"lock {self.path} lost: {e}") from e

    def check(self) -> None:
        """Returns while the lock is held; raises ``Lost`` otherwise."""
        if self._lost is not None:
            raise self._lost
        if self._released:
            raise Lost(f"lock {self.path} was released")
        if self._foreign():
            raise Lost(f"lock {self.path} belongs to the parent process (this one was made by fork())")
        if self._held is not None:
            self._check_inproc()
            return
        ag = self._agent
        msg = {"op": "check", "lock": self._number}
        try:
            reply = ag.sync_call(msg)
            if reply is None:
                if ag.dead is not None:
                    raise Lost(f"lock {self.path} lost: {ag.dead}")
                reply = ag.call(msg)
            elif reply.get("queued"):
                reply = ag.call(msg, queued=int(reply["id"]))
            elif not reply.get("ok"):
                raise from_reply(reply.get("error"))
        except AgentError as e:
            err: HoldError = Lost(f"lock {self.path} lost: {e}")
            self._lose(err)
            raise self._lost or err from e
        except Lost as e:
            # The agent's "lost" event may have come first: one loss, one
            # error, the one the lock records (Lock.lost).
            self._lose(e)
            if self._lost is not None and self._lost is not e:
                raise self._lost from None
            raise
        ag.raise_failed()  # a release written ahead failed: see release()

    def __enter__(self) -> "Lock":
        with self._mu:
            self._depth += 1
        return self

    def _leave(self) -> bool:
        """Leaves a with block: whether it was the outermost one."""
        with self._mu:
            self._depth -= 1
            return self._depth <= 0

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._leave():
            try:
                self.release()
            except HoldError:
                if exc_type is None:
                    raise  # else the body's error is the one to see; the lock goes either way

    async def __aenter__(self) -> "Lock":
        return self.__enter__()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # A release on the synchronous channel is written, not waited for;
        # on the standard channel its reply is awaited.
        if self._leave():
            try:
                await self._arelease()
            except HoldError:
                if exc_type is None:
                    raise


# The steps of the operations (see _steps): one core that the thread face
# (run, _perform) and the asyncio face (arun, _aperform) both drive.


class _Call:
    """A step: a request on the standard channel, whose reply is the
    outcome; or, with queued, the reply to that request, which the
    synchronous channel queued. held: with this thread's locks as
    held_by, for a thread that blocks until the reply (see _thread_locks)."""

    __slots__ = ("ag", "msg", "kind", "queued", "held")

    def __init__(self, ag: Agent, msg: Dict[str, Any], kind: str = "", queued: int = 0, held: bool = False) -> None:
        self.ag, self.msg, self.kind, self.queued, self.held = ag, msg, kind, queued, held


class _Content:
    """A step: the new content that an update's function returned, which
    the asyncio face awaits if it is a coroutine."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _perform(step: Any) -> Any:
    """Performs a step in the calling thread, blocking it until the outcome."""
    if type(step) is _Content:
        if asyncio.iscoroutine(step.value):
            step.value.close()  # refused below, as any other non-content: never awaited
        return step.value
    msg = _with_held_by(step.ag, step.msg) if step.held else step.msg
    return step.ag.call(msg, kind=step.kind, queued=step.queued)


async def _aperform(step: Any) -> Any:
    """Performs a step without blocking the event loop."""
    if type(step) is _Content:
        v = step.value
        return await v if asyncio.iscoroutine(v) or isinstance(v, asyncio.Future) else v
    return await _await_request(step.ag, step.msg, step.kind, step.queued)


# Options.


def _timeout_field(timeout: Optional[float]) -> Optional[float]:
    """The agent's "wait": None waits as long as it takes (as do a negative
    timeout, filelock's -1, and infinity)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise Invalid(
            f"timeout must be a number of seconds (None or -1: as long as it takes; 0: do not wait), "
            f"not {timeout!r}"
        )
    if math.isnan(timeout):
        raise Invalid("timeout must be a number of seconds, not NaN")
    if timeout < 0 or math.isinf(timeout):
        return None
    return timeout


def _path_field(what: str, value: Any) -> str:
    try:
        s = os.fsdecode(os.fspath(value))
    except TypeError:
        raise Invalid(f"{what} must be a path (str or os.PathLike), not {type(value).__name__}") from None
    if s == "":
        raise Invalid(f"{what} must not be empty")
    return s


def _strings(what: str, value: Any) -> Dict[str, str]:
    if not isinstance(value, Mapping):
        raise Invalid(f"{what} must be a mapping of strings, not {type(value).__name__}")
    out: Dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise Invalid(f"{what} keys must be strings, not {k!r}")
        if not isinstance(v, (str, int, float)):
            raise Invalid(f"{what}[{k!r}] must be a string, not {type(v).__name__}")
        out[k] = v if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)
    return out


def _request(
    target: Optional[PathLike],
    *,
    timeout: Optional[float] = None,
    shared: bool = False,
    fair: bool = False,
    protocol: Optional[str] = None,
    lock_file: Optional[PathLike] = None,
    name: Optional[str] = None,
    fields: Optional[Mapping[str, str]] = None,
    settings: Optional[Mapping[str, str]] = None,
    must_exist: bool = False,
    allow_split: bool = False,
    allow_owner_change: bool = False,
    allow_empty: bool = False,
    make_dirs: bool = False,
    mode: Optional[int] = None,
    slots: Optional[int] = None,
    deadlock_after: Optional[float] = None,
    soft_file: bool = False,
) -> Dict[str, Any]:
    """Checks the options and turns them into the request's fields.
    ``soft_file`` (hold.filelock's SoftFileLock only) asks the portable
    protocol for its file form: a plain file naming the agent, in the
    format filelock's own SoftFileLock writes and waits for."""
    req: Dict[str, Any] = {"target": "" if target is None else _path_field("target", target)}
    wait = _timeout_field(timeout)
    if wait is not None:
        req["wait"] = wait
    for key, flag in (
        ("shared", shared),
        ("fair", fair),
        ("must_exist", must_exist),
        ("allow_split", allow_split),
        ("allow_owner_change", allow_owner_change),
        ("allow_empty", allow_empty),
        ("make_dirs", make_dirs),
        ("soft_file", soft_file),
    ):
        if flag is True:
            req[key] = True
        elif flag is not False:
            raise Invalid(f"{key} must be True or False, not {flag!r}")
    if protocol is not None:
        if not isinstance(protocol, str) or not protocol:
            raise Invalid(f"protocol must be a non-empty string ('flock' or 'dir'), not {protocol!r}")
        req["protocol"] = protocol
    if lock_file is not None:
        req["lock_file"] = _path_field("lock_file", lock_file)
    if name is not None:
        if not isinstance(name, str) or not name:
            raise Invalid(f"name must be a non-empty string, not {name!r}")
        req["name"] = name
    if mode is not None:
        if isinstance(mode, bool) or not isinstance(mode, int) or not 0 < mode <= 0o777:
            raise Invalid(f"mode must be permission bits such as 0o644, not {mode!r}")
        req["mode"] = mode
    if slots is not None:
        if isinstance(slots, bool) or not isinstance(slots, int):
            raise Invalid(f"slots must be a number of slots, not {slots!r}")
        req["slots"] = slots
    if deadlock_after is not None:
        if isinstance(deadlock_after, bool) or not isinstance(deadlock_after, (int, float)) or not 0 <= deadlock_after < float("inf"):
            raise Invalid(f"deadlock_after must be a number of seconds >= 0 (0: never look for a deadlock), not {deadlock_after!r}")
        req["deadlock_after"] = deadlock_after
    if fields is not None:
        req["fields"] = _strings("fields", fields)
    if settings is not None:
        req["settings"] = _strings("settings", settings)
    return req



def _take_message(op, req, held, files):
    """The agent request that takes a lock: op and req, with the locks the
    caller keeps while it waits (held_by, held_inproc) when there are any."""
    msg = {"op": op, **req}
    if held:
        msg["held_by"] = held
    if files:
        msg["held_inproc"] = files
    return msg

def _sync_take(ag: Agent, op: str, req: Dict[str, Any], held: Optional[List[int]],
               files: Optional[List[Dict[str, Any]]] = None) -> Optional[Reply]:
    """Sends the lock request on the synchronous channel, where there is
    one: returns its reply, which may say that the agent queued it (its
    reply then comes on the standard channel: see Agent.call); raises the
    error that ends the call; or returns None to send it on the standard
    channel. Whether to try first, and what to queue, is the agent's
    decision."""
    if ag.sync is None:
        return None
    body = None if held or files else _line_body(op, req, ag.lazy)
    if body is None:
        msg = _take_message(op, req, held, files)
        if ag.lazy:
            msg["lazy"] = True
            if _inproc.enabled:
                msg["inproc"] = True
    else:
        msg = _ENCODED
    r = ag.sync_call(msg, body)
    if ag.failed:
        _undo_take(ag, r)
        ag.raise_failed()
    if r is None:
        if ag.dead is not None:
            raise ag.dead
        return None
    if r.get("ok"):
        return r
    raise from_reply(r.get("error"))


def _undo_take(ag: Agent, r: Optional[Reply]) -> None:
    """Gives back what a take got, when the reply came with the failure of
    a release written ahead, which the call raises instead."""
    if r is None or not r.get("ok"):
        return
    if r.get("queued"):
        req = Request("acquire", lambda _: None)
        req.id = int(r["id"])
        ag.adopt(req)
        ag.abandon(req)
    elif "lock" in r and not ag.release_later(Lock(ag, r)):
        ag.send_quietly({"op": "release", "lock": r["lock"]})


#: What sync_call is given for a request whose line it is given encoded.
_ENCODED: Dict[str, Any] = {}

#: The encoded lines (after their id) of recent lock requests: a loop that
#: takes one lock again and again encodes its request once.
_bodies: Dict[Tuple[Any, ...], bytes] = {}


def _line_body(op: str, req: Dict[str, Any], lazy: bool) -> Optional[bytes]:
    """The synchronous channel's line of the request, after its id, from
    the cache when it can be (None for requests with fields or settings:
    sync_call encodes those); lazy asks for a lazy acquisition."""
    if "fields" in req or "settings" in req:
        return None
    key = (op, lazy, *req.items())
    body = _bodies.get(key)
    if body is None:
        if len(_bodies) >= 256:
            _bodies.clear()
        line = {"op": op, **req, "queue": True}
        if lazy:
            line["lazy"] = True
            if _inproc.enabled:
                line["inproc"] = True
        body = json.dumps(line, separators=(",", ":")).encode()[1:] + b"\n"
        _bodies[key] = body
    return body


def _held(ag: Agent, reply: Reply, thread: Optional[int] = None) -> Lock:
    lk = Lock(ag, reply, thread)
    with ag.mu:
        if ag.dead is None:
            ag.locks[lk._number] = lk
    if ag.dead is not None:
        lk._lose(Lost(f"lock {lk.path} lost: {ag.dead}"))
    return lk


def _thread_locks(ag: Agent) -> Optional[List[int]]:
    """The locks this thread holds, for a request's ``held_by``: the thread
    cannot release them while it waits, so a wait for one of them is a
    deadlock, which the agent reports at once (``Deadlock``). Locks of
    other threads are waited for: they may be released meanwhile."""
    if not ag.locks:
        return None  # this thread's own additions are visible to it
    me = threading.get_ident()
    with ag.mu:
        held = [n for n, lk in ag.locks.items() if lk._thread == me and not lk._released and lk._lost is None]
    return held or None


def _with_held_by(ag: Agent, msg: Dict[str, Any]) -> Dict[str, Any]:
    """msg, with this thread's locks as ``held_by`` (see _thread_locks),
    and those it holds in this process as ``held_inproc``."""
    held = _thread_locks(ag)
    if held:
        msg["held_by"] = held
    files = _inproc.thread_files(threading.get_ident())
    if files:
        msg["held_inproc"] = files
    return msg


def _take_steps(ag: Agent, op: str, req: Dict[str, Any], held: Optional[List[int]],
                thread: Optional[int], reply: Optional[Reply],
                files: Optional[List[Dict[str, Any]]] = None, key: Optional[Tuple[Any, ...]] = None) -> "Steps[Lock]":
    """Takes a lock, given reply, that of its try on the synchronous
    channel (_sync_take): waited for where the agent says, or on the
    standard channel, where there is no other."""
    if reply is None:
        msg = _take_message(op, req, held, files)
        reply = yield _Call(ag, msg, "acquire")
    elif reply.get("queued"):
        reply = yield _Call(ag, {}, "acquire", int(reply["id"]))
    _inproc.learn(key, reply)
    return _held(ag, reply, thread)


def _take_here(ag: Agent, k: Tuple[Any, ...], thread: int) -> Optional[Lock]:
    """The lock of request k taken in this process with the recipe the
    agent gave for it (see _inproc), or None to ask the agent, which gives
    a fresh one where it may."""
    recipe = _inproc.recipes.pop(k, None)
    if recipe is None:
        return None
    if ag.unread or ag.failed:
        # A release written ahead may be of this very lock, which the
        # agent then still holds: its reply says it has let go (and one
        # that failed is raised here, as by any call).
        ag.barrier()
    h = _inproc.take(recipe, thread)
    if h is None:
        return None
    _inproc.recipes[k] = recipe
    lk = Lock(ag, {"lock": 0, "path": recipe.lock_path, "protocol": "flock"}, thread)
    lk._held = h
    _inproc.listed(h, lk)
    return lk


def _take(op: str, req: Dict[str, Any]) -> Lock:
    ag = get_agent()
    thread = threading.get_ident()
    k = _inproc.key(op, req) if ag.lazy and _inproc.enabled else None
    if k is not None and _inproc.recipes:
        lk = _take_here(ag, k, thread)
        if lk is not None:
            return lk
    held = _thread_locks(ag) if op == "acquire" else None
    files = _inproc.thread_files(thread) if op == "acquire" else None
    reply = _sync_take(ag, op, req, held, files)
    if reply is not None and not reply.get("queued"):
        _inproc.learn(k, reply)
        return _held(ag, reply, thread)  # taken at once: no step to drive
    return run(_take_steps(ag, op, req, held, thread, reply, files, k), _perform)


# The API. The faces of each operation take the same options; the checks
# and the steps are shared (_request, the *_steps functions).


def lock(
    target: Optional[PathLike] = None, *, timeout: Optional[float] = None, shared: bool = False, fair: bool = False,
    protocol: Optional[str] = None, lock_file: Optional[PathLike] = None, name: Optional[str] = None, mode: Optional[int] = None,
    fields: Optional[Mapping[str, str]] = None, settings: Optional[Mapping[str, str]] = None, make_dirs: bool = False,
    slots: Optional[int] = None, deadlock_after: Optional[float] = None,
) -> Lock:
    """Takes the lock of target and returns it, held.

    The lock is the file ``<target>.lock``, or ``lock_file`` (locked exactly
    as flock(1) and filelock lock it), or the named lock ``name`` in the
    user's private lock directory, or an ``etcd://host:port/key`` address.
    ``timeout`` is in seconds: None (or -1) waits as long as it takes, 0
    does not wait (``Busy``), otherwise ``Timeout`` when it runs out.
    ``shared`` takes a reader lock, ``fair`` waits in line (first come,
    first served), ``protocol`` is ``"flock"`` (kernel locks, the default)
    or ``"dir"`` (portable, for network filesystems); ``fields`` are added to
    the owner record, ``settings`` configure network backends. ``mode``
    gives a lock file this call creates its permission bits (under the
    umask; 0o666 otherwise). A missing parent directory of the lock file is
    an error (``NotFound``), as for the hold command, Go and Node, unless
    ``make_dirs`` is True, which makes it (mode 0777 under the umask), as
    filelock does. ``slots=n`` takes one of n slots of a counting semaphore
    instead (at most n holders at once, as ``hold run --slots n``); the
    Lock's ``slot`` says which, 0 to n-1. ``deadlock_after`` is the seconds
    a wait lasts before it looks for a deadlock between processes (default
    1, 0: never): when the waits of several processes form a cycle (this
    thread holds ``a`` and waits for ``b``, whose holder waits for ``a``),
    the wait that began last raises ``Deadlock`` naming every process and
    lock. A thread's
    wait keeps the locks that thread holds; a task's (``alock``) keeps
    none, since other tasks may release them meanwhile.

    Use it in a ``with`` statement, which releases it, or call
    ``release()``. Each call is an acquisition of its own: a second lock()
    of a lock that another thread of this process holds waits, as another
    process would; one of a lock this thread holds (on another Lock) raises
    ``Deadlock`` at once, since the thread could never release it. (Enter
    the same Lock again instead: it is re-entrant.)
    """
    req = _request(target, timeout=timeout, shared=shared, fair=fair, protocol=protocol, lock_file=lock_file,
                   name=name, fields=fields, settings=settings, make_dirs=make_dirs, mode=mode, slots=slots,
                   deadlock_after=deadlock_after)
    return _take("acquire", req)


def try_lock(
    target: Optional[PathLike] = None, *, shared: bool = False, fair: bool = False,
    protocol: Optional[str] = None, lock_file: Optional[PathLike] = None, name: Optional[str] = None,
    fields: Optional[Mapping[str, str]] = None, settings: Optional[Mapping[str, str]] = None,
    mode: Optional[int] = None, make_dirs: bool = False, slots: Optional[int] = None,
) -> Lock:
    """Takes the lock if it is free; raises ``Busy``, naming the holder,
    otherwise. The options are lock()'s."""
    req = _request(target, shared=shared, fair=fair, protocol=protocol, lock_file=lock_file,
                   name=name, fields=fields, settings=settings, make_dirs=make_dirs, mode=mode, slots=slots)
    return _take("try", req)


class _AsyncAcquire:
    """What alock() returns: await it for the Lock, or use it in ``async
    with``, which releases the lock at the end of the block."""

    def __init__(self, req: Dict[str, Any]) -> None:
        self._req = req
        self._lock: Optional[Lock] = None

    def __await__(self) -> Generator[Any, None, Lock]:
        return self._acquire().__await__()

    async def __aenter__(self) -> Lock:
        self._lock = await self._acquire()
        return self._lock

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._lock is not None:
            await self._lock.__aexit__(exc_type, exc, tb)

    async def _acquire(self) -> Lock:
        # No held_by: the tasks of an event loop may release locks for
        # one another while one of them waits.
        ag = get_agent()
        reply = _sync_take(ag, "acquire", self._req, None)
        return await arun(_take_steps(ag, "acquire", self._req, None, None, reply), _aperform)


async def _await_request(ag: Agent, msg: Dict[str, Any], kind: str, queued: int = 0) -> Reply:
    """Sends msg on the standard channel and awaits its reply without
    blocking the event loop; or, with queued, awaits so the reply to that
    request, which the synchronous channel queued (msg is then not sent).
    Cancelling the task cancels the agent's wait (and undoes a success that
    comes anyway)."""
    loop = asyncio.get_running_loop()
    fut: "asyncio.Future[None]" = loop.create_future()

    def resolve() -> None:
        if not fut.done():
            fut.set_result(None)

    def wake(_: Request) -> None:
        try:
            loop.call_soon_threadsafe(resolve)
        except RuntimeError:
            pass  # the loop is closed: nobody waits any more

    req = Request(kind, wake)
    with ag.abandoning(req):
        ag.submit(msg, req, queued)
        await fut
    return req.result()


def alock(
    target: Optional[PathLike] = None, *, timeout: Optional[float] = None, shared: bool = False, fair: bool = False,
    protocol: Optional[str] = None, lock_file: Optional[PathLike] = None, name: Optional[str] = None, mode: Optional[int] = None,
    fields: Optional[Mapping[str, str]] = None, settings: Optional[Mapping[str, str]] = None, make_dirs: bool = False,
    slots: Optional[int] = None, deadlock_after: Optional[float] = None,
) -> _AsyncAcquire:
    """lock() for asyncio: ``async with hold.alock("target") as l:``, or
    ``l = await hold.alock("target")``. The wait never blocks the event
    loop, and cancelling the task ends it (a free lock is taken with a
    blocking call of a few µs, as release() is). Its wait keeps no lock of
    this process for the deadlock search (``deadlock_after``): other tasks
    may release them meanwhile, so a cycle through it is not reported."""
    req = _request(target, timeout=timeout, shared=shared, fair=fair, protocol=protocol, lock_file=lock_file,
                   name=name, fields=fields, settings=settings, make_dirs=make_dirs, mode=mode, slots=slots,
                   deadlock_after=deadlock_after)
    return _AsyncAcquire(req)


def _file_request(path: PathLike, **options: Any) -> Dict[str, Any]:
    """The request of update or append: its options checked."""
    return _request(_path_field("path", path), **options)


def _new_content(new: Any) -> bytes:
    if isinstance(new, str):
        return new.encode("utf-8")
    if isinstance(new, (bytes, bytearray, memoryview)):
        return bytes(new)
    raise Invalid(
        f"the update function returned {type(new).__name__}: return the new content "
        "(str or bytes), or raise to write nothing"
    )


def _update_steps(fn: Callable[[Any], Any], binary: bool, req: Dict[str, Any]) -> "Steps[Reply]":
    """update(): the file's content under its lock, fn's result committed,
    or the update aborted (nothing written) if fn fails."""
    if not callable(fn):
        raise Invalid("update needs a function from the old content to the new")
    if not isinstance(binary, bool):
        raise Invalid(f"binary must be True or False, not {binary!r}")
    ag = get_agent()
    reply = yield _Call(ag, {"op": "update", **req}, "update", held=True)
    number = reply["update"]
    old = decode(reply.get("data"))
    try:
        new = fn(old if binary else old.decode("utf-8"))
        if asyncio.iscoroutine(new) or isinstance(new, asyncio.Future):
            new = yield _Content(new)
        data = _new_content(new)
    except Exception:
        # Wait for the abort, so that the lock is free when the error is seen.
        try:
            yield _Call(ag, {"op": "abort", "update": number})
        except HoldError:
            pass
        raise
    except BaseException:
        ag.send_quietly({"op": "abort", "update": number})
        raise
    done: Reply = yield _Call(ag, {"op": "commit", "update": number, "data": encode(data)})
    return done


def _written(done: Reply) -> bool:
    """An update's outcome: whether the file was written; what ``hold
    update`` would print as a warning is issued as a HoldWarning, naming
    the file, at the caller of update() or aupdate()."""
    warning = done.get("warning")
    if isinstance(warning, str) and warning:
        warnings.warn(warning, HoldWarning, stacklevel=3)
    return bool(done.get("written"))


def update(
    path: PathLike, fn: Callable[[Any], Union[str, bytes]], *, binary: bool = False, must_exist: bool = False,
    allow_split: bool = False, allow_owner_change: bool = False, allow_empty: bool = False,
    timeout: Optional[float] = None, fair: bool = False, protocol: Optional[str] = None,
    lock_file: Optional[PathLike] = None, name: Optional[str] = None,
    fields: Optional[Mapping[str, str]] = None, settings: Optional[Mapping[str, str]] = None,
) -> bool:
    """Changes the file under its lock (``<path>.lock`` unless lock_file or
    name): fn gets the old content (a str, or bytes with ``binary=True``;
    empty if the file does not exist, unless must_exist: then it raises
    ENOENT) and returns the new (str or bytes), which replaces the file
    atomically, as ``hold update`` does: a temp file beside it, synced,
    renamed over it. Nothing is written if fn raises (its error propagates)
    or returns the old content. Returns whether the file was written.
    Empty new content is refused (``HoldError`` with code EIO) and the
    file left as it was, unless allow_empty: then it empties the file, as
    ``hold update --allow-empty`` does.

    A file with other hard links, or one whose owner or group the new file
    could not have, is refused (``HoldError`` with code EACCES) before fn
    runs, unless allow_split (the other names keep the old content) or
    allow_owner_change (the file becomes the agent's user's) accepts it.
    What ``hold update`` would print as a warning once the file is replaced
    (the owner changed, the directory could not be synced) is issued as a
    ``HoldWarning`` with ``warnings.warn``.

    There is no ``shared`` or ``slots``: update() holds the lock alone, as
    it must, since a second holder beside it would read the same old
    content and one change would be lost (passing either is a TypeError).
    The same holds for append()."""
    req = _file_request(path, timeout=timeout, fair=fair, protocol=protocol, lock_file=lock_file, name=name,
                        fields=fields, settings=settings, must_exist=must_exist, allow_split=allow_split,
                        allow_owner_change=allow_owner_change, allow_empty=allow_empty)
    return _written(run(_update_steps(fn, binary, req), _perform))


async def aupdate(
    path: PathLike, fn: Callable[[Any], Any], *, binary: bool = False, must_exist: bool = False,
    allow_split: bool = False, allow_owner_change: bool = False, allow_empty: bool = False,
    timeout: Optional[float] = None, fair: bool = False, protocol: Optional[str] = None,
    lock_file: Optional[PathLike] = None, name: Optional[str] = None,
    fields: Optional[Mapping[str, str]] = None, settings: Optional[Mapping[str, str]] = None,
) -> bool:
    """update() for asyncio: the wait and the round trips never block the
    event loop, and fn may be a coroutine function. Cancelling the task
    ends the wait, or aborts the update (nothing is written)."""
    req = _file_request(path, timeout=timeout, fair=fair, protocol=protocol, lock_file=lock_file, name=name,
                        fields=fields, settings=settings, must_exist=must_exist, allow_split=allow_split,
                        allow_owner_change=allow_owner_change, allow_empty=allow_empty)
    return _written(await arun(_update_steps(fn, binary, req), _aperform))


def _append_steps(data: Union[str, bytes], req: Dict[str, Any]) -> "Steps[None]":
    """append(): data written under the lock, in one write and an fsync."""
    if isinstance(data, str):
        raw = data.encode("utf-8")
    elif isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
    else:
        raise Invalid(f"data must be str or bytes, not {type(data).__name__}")
    yield _Call(get_agent(), {"op": "append", **req, "data": encode(raw)}, "append", held=True)


def append(
    path: PathLike, data: Union[str, bytes], *, must_exist: bool = False, timeout: Optional[float] = None,
    fair: bool = False, protocol: Optional[str] = None, lock_file: Optional[PathLike] = None,
    name: Optional[str] = None, fields: Optional[Mapping[str, str]] = None,
    settings: Optional[Mapping[str, str]] = None,
) -> None:
    """Appends data (str, as UTF-8, or bytes) to the file under its lock, in
    one write followed by an fsync, so concurrent appenders never
    interleave."""
    req = _file_request(path, must_exist=must_exist, timeout=timeout, fair=fair, protocol=protocol,
                        lock_file=lock_file, name=name, fields=fields, settings=settings)
    run(_append_steps(data, req), _perform)


async def aappend(
    path: PathLike, data: Union[str, bytes], *, must_exist: bool = False, timeout: Optional[float] = None,
    fair: bool = False, protocol: Optional[str] = None, lock_file: Optional[PathLike] = None,
    name: Optional[str] = None, fields: Optional[Mapping[str, str]] = None,
    settings: Optional[Mapping[str, str]] = None,
) -> None:
    """append() for asyncio: the wait never blocks the event loop."""
    req = _file_request(path, must_exist=must_exist, timeout=timeout, fair=fair, protocol=protocol,
                        lock_file=lock_file, name=name, fields=fields, settings=settings)
    await arun(_append_steps(data, req), _aperform)


def _status_steps(req: Dict[str, Any]) -> "Steps[Dict[str, Any]]":
    """status(): the lock's state, without taking it."""
    reply = yield _Call(get_agent(), {"op": "status", **req})
    st = reply.get("status")
    return dict(st) if isinstance(st, dict) else {}


def status(
    target: Optional[PathLike] = None, *, protocol: Optional[str] = None, lock_file: Optional[PathLike] = None,
    name: Optional[str] = None, settings: Optional[Mapping[str, str]] = None,
) -> Dict[str, Any]:
    """Reports the lock's state without taking it, as ``hold status --json``
    does: ``lock_file``, ``protocol``, ``state`` ("free", "held exclusive",
    "held shared" or "stale"), ``held``, ``token``, ``holder`` (pid, host,
    alive, command, started_at, held_seconds), ..."""
    req = _request(target, protocol=protocol, lock_file=lock_file, name=name, settings=settings)
    return run(_status_steps(req), _perform)


async def astatus(
    target: Optional[PathLike] = None, *, protocol: Optional[str] = None, lock_file: Optional[PathLike] = None,
    name: Optional[str] = None, settings: Optional[Mapping[str, str]] = None,
) -> Dict[str, Any]:
    """status() for asyncio."""
    req = _request(target, protocol=protocol, lock_file=lock_file, name=name, settings=settings)
    return await arun(_status_steps(req), _aperform)
