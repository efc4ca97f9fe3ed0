"""filelock's API on hold: change one import, keep every call.

::

    from hold.filelock import FileLock, Timeout   # was: from filelock import ...

    lock = FileLock("high_ground.txt.lock", timeout=1)
    with lock:
        ...

``FileLock``, ``SoftFileLock``, ``AsyncFileLock``, ``AsyncSoftFileLock``,
``BaseFileLock``, ``BaseAsyncFileLock``, ``AcquireReturnProxy``,
``AsyncAcquireReturnProxy`` and ``Timeout`` take filelock's arguments, with
its defaults, and behave as its current release documents: the lock file is
the path given (not ``<path>.lock``), re-entrant per object
(``lock_counter``), per thread unless ``thread_local=False`` (per task for
the async classes, whose default is shared), ``is_singleton`` objects per
path, ``acquire(timeout, poll_interval, blocking=, cancel_check=)``,
``release(force=)``, ``with lock:`` and ``with lock.acquire():``, the
``"filelock"`` logger with its debug lines, and ``Timeout`` (also a
``hold.Timeout`` and a builtin ``TimeoutError``) for a wait that ends,
including one on a lock that another object of this thread (or task)
holds. An endless wait on such a lock would never end: it raises
``hold.Deadlock`` (a ``RuntimeError``, as filelock's is) at once.

``FileLock`` takes the kernel lock (flock) on that file, as filelock's
``UnixFileLock`` does, so hold and filelock processes exclude each other;
the lock is held by hold's agent, so a crash frees it and ``hold status``
names the holder. ``SoftFileLock`` takes the lock on hold's portable
protocol (for network filesystems), at the same path.

Where an option cannot mean what it means under filelock:

- ``on_acquired`` gets a descriptor of the lock file opened by this process
  (read and write), closed on release; the lock itself is held by the
  agent. What the callback writes replaces hold's owner record in the file.
- ``close_error_policy`` applies to closing that descriptor only.
- ``fallback_to_soft`` and ``preserve_lock_file`` are kept and reported:
  hold never unlinks a kernel lock's file on release and never falls back
  to another protocol by itself (a filesystem without flock is an error
  that says so).
- ``lifetime``: a native lock ignores it with a warning, as filelock's
  does; for ``SoftFileLock`` too, since the portable protocol judges a lock
  stale by its holder's heartbeat and never breaks a live holder. It is
  checked as filelock checks it (constructor and setter) and reads None;
  the warning is both a ``UserWarning`` and a
  ``SoftFileLockLifetimeWarning``.
- ``AsyncFileLock``'s ``loop``, ``run_in_executor`` and ``executor`` are
  accepted and reported: hold's waits never block the event loop, so no
  executor is used for them (only for ``on_acquired``).
- Tests that replace ``os`` or ``fcntl`` functions in-process to simulate
  filesystem failures do not reach hold: the files are opened by the agent.
- Subclasses that override filelock's private ``_acquire`` and ``_release``
  get no say: hold takes the lock. The tests of filelock's own suite that
  cannot apply for these reasons are listed, each with its reason, in
  ``python/tests/filelock_suite_skips.txt`` of hold's repository.
- filelock's answers to shared filesystems are hold's portable protocol,
  which never lets two live holders in and takes a dead holder's lock over
  at once: ``StrictSoftFileLock``, ``MarkerSoftFileLock`` and
  ``SoftFileLease`` (and their ``Async`` classes) are ``SoftFileLock``
  with their own options. A lease's ``lease_duration`` and
  ``heartbeat_interval`` are checked and reported, but hold's agent keeps
  the lock fresh while this process lives and no peer takes a live
  holder's lease by age; ``token`` is a random token per hold, and
  ``compromise`` (``LeaseCompromise``) says when the agent found the lock
  lost. ``StrictSoftFileLock.claims`` is empty: no claim files are made.
  ``SoftReadWriteLock`` and ``AsyncSoftReadWriteLock`` are
  ``ReadWriteLock`` and ``AsyncReadWriteLock`` (the portable protocol has
  no shared locks), with their options checked and kept.
- The value types and errors of those machineries (``LeaseClaim``,
  ``LeaseHeartbeat``, ``OwnerRecord``, ``StrictSoftFileClaim``,
  ``StrictRelease``, ``InFlight``, ``AcquireWait``, ``FileLockContext``,
  ``LockOptions``, ``ReleasePendingError``, ``SoftFileLockProtocolError``,
  ``LeaseSettingsMismatch``, the ``Literal`` type names) are filelock's,
  for code that names them; hold's locks make few of them (a release is
  waited for, so ``ReleasePendingError`` is never raised).
- ``lock_descriptor`` and ``unlock_descriptor`` take and give up the
  kernel lock ``FileLock`` takes on a descriptor of the caller's, in this
  process; ``has_fcntl`` says whether that is flock here. ``__version__``
  (and ``hold.filelock.version``) is the version of filelock's API this
  module provides, 4.3.1; hold's own is ``hold.__version__``.
- After ``fork()``, the child's lock objects made before it are not held
  there (the parent's agent holds the parent's locks): ``is_locked`` is
  false, ``release()`` does nothing, and ``acquire()`` raises
  ``RuntimeError`` (construct a new object), as filelock's do; descriptors
  lent to ``on_acquired`` are closed in the child.
- The async classes call ``on_acquired`` in their executor (the loop's
  default one unless ``executor`` is given), not on the event loop, as
  filelock does; ``run_in_executor=False`` calls it in place.
- ``ReadWriteLock``'s readers and writers wait in hold's fair queue (not
  on Windows), so a waiting writer goes before the readers that come after
  it instead of starving behind them.
- ``ReadWriteLock`` has filelock's API (``read_lock()``, ``write_lock()``,
  ``acquire_read``, ``acquire_write``, ``release(force=)``, ``close``,
  ``get_lock``, one object per path by default) on hold's shared and
  exclusive kernel locks of the file, which ``hold.lock(lock_file=...,
  shared=...)``, ``hold run --shared`` and flock(1) share. It cannot
  exclude filelock's own ``ReadWriteLock``, which holds SQLite
  transactions in an SQLite database at the path, locks that kernel locks
  do not see. So the two refuse each other's file instead: hold's raises
  ``ValueError`` for an SQLite database, and gives a missing or empty lock
  file its owner record when it is made, which filelock's then refuses
  (``sqlite3.DatabaseError``: the file is not a database). Switch every
  process of one lock file at once; a filelock holder that holds a path at
  the very moment hold's object for it is made is not excluded.
  ``AsyncReadWriteLock`` is the same for asyncio, per task where
  ``ReadWriteLock`` is per thread, with filelock's API (``read_lock()``,
  ``write_lock()``, ``acquire_read``, ``acquire_write``, ``release(force=)``,
  ``close``); its ``loop`` and ``executor`` are kept and reported, as
  ``AsyncFileLock``'s are.
- A kernel lock's release is written to the agent and not waited for (see
  ``hold.Lock.release``): another process, or filelock in this one, may
  find the lock held for the µs the agent takes to release it; every call
  of hold's in this process comes after it. A ``SoftFileLock``'s release
  is waited for: its lock file is gone when ``release()`` returns.
- ``SoftFileLock``'s lock is a plain file at the path in the format of
  filelock's own ``SoftFileLock``, naming the process that created it
  (hold's agent): filelock's ``SoftFileLock`` in another process waits for
  it as for one of its own, and hold waits for filelock's. Each judges the
  other's holder as filelock does (alive: held, however old; gone: taken
  over at once), so the two never hold at once, and one process can switch
  its import before another. The file has no room for a fencing token.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import logging
import os
import threading
import time
import warnings
from abc import ABCMeta
from types import TracebackType
from typing import Any, Callable, ContextManager, Dict, Iterator, Optional, Tuple, Type, Union
import weakref
from weakref import WeakValueDictionary

from .. import _AsyncAcquire as _HoldAsyncAcquire, _errors, _request as _hold_request, _take as _hold_take
from .. import alock as _hold_alock, lock as _hold_lock, try_lock as _hold_try_lock
from .._errors import Deadlock
from .._steps import Steps, arun, run
from . import _api
from ._api import (
    AcquireWait, CloseErrorPolicy, CompromiseReason, ContextErrorPolicy, InFlight, LeaseClaim, LeaseCompromise,
    LeaseHeartbeat, LeaseSettingsMismatch, LockOptions, OwnerMode, OwnerRecord, ReleasePendingError,
    SoftFileLockLifetimeWarning, SoftFileLockProtocolError, StrictSoftFileClaim,
    StrictSoftFileClaimState, lock_descriptor, unlock_descriptor,
)

# filelock 4.3.1's __all__, every name.
__all__ = [
    "AcquireReturnProxy",
    "AcquireWait",
    "AsyncAcquireReadWriteReturnProxy",
    "AsyncAcquireReturnProxy",
    "AsyncAcquireSoftReadWriteReturnProxy",
    "AsyncFileLock",
    "AsyncReadWriteLock",
    "AsyncSoftFileLease",
    "AsyncSoftFileLock",
    "AsyncSoftReadWriteLock",
    "AsyncStrictSoftFileLock",
    "AsyncUnixFileLock",
    "AsyncWindowsFileLock",
    "BaseAsyncFileLock",
    "BaseFileLock",
    "CloseErrorPolicy",
    "CompromiseReason",
    "ContextErrorPolicy",
    "FileLock",
    "FileLockContext",
    "InFlight",
    "LeaseClaim",
    "LeaseCompromise",
    "LeaseHeartbeat",
    "LeaseSettingsMismatch",
    "LockOptions",
    "MarkerSoftFileLock",
    "OwnerMode",
    "OwnerRecord",
    "ReadWriteLock",
    "ReleasePendingError",
    "SoftFileLease",
    "SoftFileLock",
    "SoftFileLockLifetimeWarning",
    "SoftFileLockProtocolError",
    "SoftReadWriteLock",
    "StrictRelease",
    "StrictSoftFileClaim",
    "StrictSoftFileClaimState",
    "StrictSoftFileLock",
    "Timeout",
    "UnixFileLock",
    "WindowsFileLock",
    "__version__",
    "asyncio",
    "has_fcntl",
    "lock_descriptor",
    "unlock_descriptor",
]

_LOGGER = logging.getLogger("filelock")


class _LazyAsyncio:
    """asyncio, imported on first use (by the async classes): most of the
    import time of a program that locks from threads only."""

    def __getattr__(self, name: str) -> Any:
        import asyncio as module

        globals()["_aio"] = module
        return getattr(module, name)


_aio: Any = _LazyAsyncio()

#: mode= not given: the file is created 0o666 under the umask and never chmod-ed.
_UNSET_MODE = -1

_CONTEXT_ERROR_POLICIES = ("chain", "group")
_CLOSE_ERROR_POLICIES = ("default", "raise", "suppress")

#: BaseExceptionGroup (Python 3.11+), for context_error_policy="group".
_exception_group: Any = getattr(builtins, "BaseExceptionGroup", None)


class Timeout(_errors.Timeout):
    """The lock could not be acquired in ``timeout`` seconds (or at once,
    with ``blocking=False``, or ``cancel_check`` said to stop). filelock's
    exception: ``lock_file`` names the file; also a ``hold.Timeout`` and a
    builtin ``TimeoutError``."""

    def __init__(self, lock_file: str, holder: Optional[str] = None) -> None:
        message = f"The file lock '{lock_file}' could not be acquired."
        super().__init__(message)  # args: filelock's, without the holder
        if holder is not None:
            message += f" It is held by {holder}, which this host cannot probe."
        self._message = message
        #: The path of the file lock.
        self.lock_file = lock_file
        self._holder = holder

    def __reduce__(self) -> Any:
        return (type(self), (self.lock_file,), self.__dict__)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.lock_file!r})"

    def __str__(self) -> str:
        return getattr(self, "_message", None) or super().__str__()


def _canonical(path: str) -> str:
    """One key for equivalent spellings of a lock path (the parent resolved,
    the last name kept, so a final symlink stays itself)."""
    parent, name = os.path.split(path)
    return os.path.join(os.path.realpath(parent or os.curdir), name)


def _check_path(path: str, soft: bool) -> None:
    """The errors filelock's os.open gives for these paths; makes a soft lock's missing directories, as
    filelock does (the agent makes a kernel lock's)."""
    if path == "":
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    if "\0" in path:
        raise ValueError("embedded null byte")
    # A soft lock is a file too (the portable protocol's file form, as
    # filelock's marker): a directory at the path is no lock of either.
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(parent):
        return
    # A missing directory, or a file where one should be: the nearest
    # existing ancestor says which (filelock's os.open says ENOTDIR).
    up = parent
    while not os.path.lexists(up) and os.path.dirname(up) != up:
        up = os.path.dirname(up)
    if not os.path.isdir(up):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
    if soft:
        os.makedirs(parent, exist_ok=True)


class FileLockContext:
    """The state of a lock object (filelock's name): its settings
    (``lock_file``, ``timeout``, ``mode``, ``blocking``, ``poll_interval``,
    ``lifetime``), ``lock_counter``, and ``lock_file_fd``, the descriptor
    lent to ``on_acquired`` while held. Shared by the object's threads, or
    one per thread (``thread_local``)."""

    def __init__(self, lock_file: str, timeout: float, mode: int, blocking: bool, poll_interval: float,
                 lifetime: Optional[float] = None) -> None:
        self.lock_file, self.timeout, self.mode = lock_file, timeout, mode
        self.blocking, self.poll_interval, self.lifetime = blocking, poll_interval, lifetime
        self.held: Any = None  # the hold.Lock while held
        self.fd: Optional[int] = None  # the descriptor lent to on_acquired
        self.lock_counter = 0
        # The path checked (_check_path) and hold.lock()'s options for it,
        # at the first acquisition: the same for every one after.
        self.kw: Optional[Dict[str, Any]] = None
        # The request of an endless wait, or of no wait, checked once:
        # hold.lock() with kw and that timeout (see _Take).
        self.requests: Dict[Optional[float], Dict[str, Any]] = {}

    def acquire_wait(self, timeout: Optional[float], poll_interval: Optional[float],
                     poll_intervall: Optional[float] = None, *, blocking: Optional[bool] = None,
                     cancel_check: Optional[Callable[[], bool]] = None) -> AcquireWait:
        """One acquisition's settings: the call's, or this context's where
        the call gives None, and when the wait began."""
        if poll_intervall is not None:
            warnings.warn("use poll_interval instead of poll_intervall", DeprecationWarning, stacklevel=2)
            poll_interval = poll_intervall
        return AcquireWait(
            self.blocking if blocking is None else blocking,
            cancel_check,
            self.timeout if timeout is None else timeout,
            self.poll_interval if poll_interval is None else poll_interval,
            time.perf_counter(),
        )

    @property
    def lock_file_fd(self) -> Optional[int]:
        """The descriptor lent to ``on_acquired`` while held (hold's agent
        holds the lock itself), else None."""
        return self.fd


_Context = FileLockContext


class _ThreadLocalContext(_Context, threading.local):
    """A _Context of each thread's own (threading.local calls __init__ again
    with the same arguments in every thread)."""


class _Meta(ABCMeta):
    """Makes ``is_singleton=True`` return the one live object of a path."""

    def __call__(cls, lock_file: Union[str, "os.PathLike[str]"], *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("is_singleton", False):
            return super().__call__(lock_file, *args, **kwargs)
        existing, made = _singleton(cls, lock_file, lambda: super(_Meta, cls).__call__(lock_file, *args, **kwargs))
        if made:
            existing._singleton_given = _given_options(cls, lock_file, args, kwargs, defaults=True)
            return existing
        # The options this call gives, compared with what the first
        # construction had, without running __init__ again: a subclass's
        # __init__ may have effects. An option not given (or given as None,
        # a subclass's "not given") is not compared.
        given = _given_options(cls, lock_file, args, kwargs, defaults=False)
        before = getattr(existing, "_singleton_given", {})
        differing = []
        for name in sorted(given):
            old, new = before.get(name), given.get(name)
            if new is None:
                continue
            same = old is new if callable(old) or callable(new) else old == new
            if not same:
                differing.append(f"\n\t{name} (existing lock has {old} but {new} was passed)")
        if differing:
            raise ValueError(
                "Singleton lock instances cannot be initialized with differing arguments\nNon-matching arguments: "
                + "".join(differing)
            )
        return existing


def _given_options(cls: type, lock_file: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any], *,
                   defaults: bool) -> Dict[str, Any]:
    """The arguments of a construction, by name, with the defaults of the
    class's __init__ filled in (and those of BaseFileLock's for the options
    a subclass passes on as **kwargs), lock_file and is_singleton left out."""
    import inspect

    got: Dict[str, Any] = {}
    for init in (BaseFileLock.__init__, cls.__init__):  # type: ignore[misc]
        try:
            bound = inspect.signature(init).bind(None, lock_file, *args, **kwargs)
        except TypeError:
            continue  # the class's own call raises it
        if defaults:
            bound.apply_defaults()
        for name, value in bound.arguments.items():
            param = bound.signature.parameters[name]
            if param.kind is param.VAR_KEYWORD:
                got.update(value)
            elif param.kind is not param.VAR_POSITIONAL:
                got[name] = value
    for name in ("self", "lock_file", "is_singleton"):
        got.pop(name, None)
    if "thread_local" in got:
        got["thread_local"] = bool(got["thread_local"])
    # Timeouts that wait the same are the same: every negative one and
    # infinity wait as long as it takes, and NaN is NaN.
    t = got.get("timeout")
    if isinstance(t, (int, float)) and not isinstance(t, bool):
        got["timeout"] = "nan" if t != t else -1 if t < 0 or t == float("inf") else t
    return got


_singleton_mu = threading.Lock()


def _singleton(cls: type, lock_file: Union[str, "os.PathLike[str]"], make: Callable[[], Any]) -> Tuple[Any, bool]:
    """The live object of cls for lock_file's path, made by make if there
    is none; and whether it was made now."""
    registry: WeakValueDictionary[str, Any] = cls.__dict__.get("_singletons")  # type: ignore[assignment]
    if registry is None:
        registry = WeakValueDictionary()
        setattr(cls, "_singletons", registry)
    key = _canonical(os.fspath(lock_file))
    with _singleton_mu:
        obj = registry.get(key)
        if obj is not None:
            return obj, False
        obj = registry[key] = make()
        return obj, True
_SINGLETON_OPTIONS = (
    "thread_local", "timeout", "mode", "blocking", "poll_interval", "lifetime",
    "context_error_policy", "close_error_policy", "fallback_to_soft", "preserve_lock_file",
)


def _resolve_wait(timeout: Any, poll_interval: Any, blocking: Any) -> Tuple[float, float, bool]:
    """An acquisition's timeout, poll interval and blocking, checked as
    filelock checks them: numbers of seconds (not bools), a finite
    non-negative poll interval within threading.TIMEOUT_MAX, no NaN
    timeout for a wait; an infinite timeout is an endless wait (-1)."""
    if type(blocking) is not bool:
        raise TypeError(f"blocking must be a bool, not {type(blocking).__name__}")
    if type(poll_interval) is not float:
        poll_interval = _seconds("poll_interval", poll_interval)
    if not 0 <= poll_interval < float("inf"):
        raise ValueError(f"poll_interval must be finite and non-negative, not {poll_interval!r}")
    if poll_interval > threading.TIMEOUT_MAX:
        raise ValueError(
            f"poll_interval must not exceed threading.TIMEOUT_MAX ({threading.TIMEOUT_MAX}), got {poll_interval!r}"
        )
    if type(timeout) is not float:
        timeout = _seconds("timeout", timeout)
    if timeout != timeout and blocking:
        raise ValueError("timeout must be a number of seconds, not nan")
    if timeout == float("inf"):
        timeout = -1.0
    return timeout, poll_interval, blocking


def _timeout_setting(value: Any) -> float:
    """A timeout set on a lock: a number of seconds; a string still
    converts, with filelock's deprecation warning."""
    if isinstance(value, (str, bytes, bytearray)):
        warnings.warn("setting timeout from a string is deprecated and will be removed; pass a number",
                      DeprecationWarning, stacklevel=4)
        value = float(value)
    return _seconds("timeout", value)


def _mutex_wait(blocking: bool, timeout: float, cancel_check: Optional[Callable[[], bool]]) -> Tuple[bool, float]:
    """The arguments of threading.Lock.acquire for a shared object's own
    mutex: no wait for one attempt (or a cancel_check, asked once), the
    timeout for a finite wait, else as long as it takes."""
    if not blocking or timeout == 0 or cancel_check is not None and cancel_check():
        return False, -1
    return True, -1 if timeout < 0 else min(timeout, threading.TIMEOUT_MAX)


def _ignored_lifetime(lifetime: Any, cls: str, stacklevel: int) -> None:
    """Checks a ``lifetime`` as filelock does (a finite, non-negative
    number of seconds, or None) and warns that hold ignores it."""
    if lifetime is None:
        return None
    import decimal
    import math
    import numbers

    if isinstance(lifetime, bool) or not isinstance(lifetime, (numbers.Real, decimal.Decimal)):
        raise TypeError(f"lifetime must be a number of seconds, not {type(lifetime).__name__}")
    if isinstance(lifetime, decimal.Decimal) and lifetime.is_snan():
        seconds = math.nan
    else:
        try:
            seconds = float(lifetime)
        except OverflowError:
            raise ValueError(f"lifetime is too large to be a number of seconds: {lifetime!r}") from None
        if seconds == 0 and lifetime < 0:
            seconds = -1.0  # a negative value too small for a float is still negative
    if not 0 <= seconds < math.inf:
        raise ValueError(f"lifetime must be finite and non-negative, not {lifetime!r}")
    warnings.warn(
        f"lifetime is ignored for {cls}: under hold a lock is judged stale by its holder's liveness "
        "(kernel locks) or heartbeat (portable protocol), never broken by age while its holder lives",
        _api._LifetimeIgnored,
        stacklevel=stacklevel,
    )
    return None


def _attempt_wait(blocking: bool, timeout: float, elapsed: float, poll_interval: float,
                  cancel_check: Optional[Callable[[], bool]]) -> Optional[float]:
    """How long one attempt may wait for the lock: 0 for one try, None for
    as long as it takes, else what is left of the timeout; never longer
    than poll_interval when cancel_check must be asked between attempts."""
    if not blocking:
        return 0
    if timeout < 0:
        return poll_interval if cancel_check is not None else None
    wait = max(0.0, timeout - elapsed)
    if cancel_check is not None:
        wait = min(wait, poll_interval)
    return wait


def _missed(lock_id: int, path: str, blocking: bool, timeout: float, start: float, poll_interval: float,
            cancel_check: Optional[Callable[[], bool]]) -> None:
    """After an attempt that did not get the lock: raises ``Timeout`` when
    the acquisition ends here (one try, a cancellation, the timeout spent),
    logging why as filelock does; otherwise logs the next wait."""
    if not blocking:
        _LOGGER.debug("Failed to immediately acquire lock %s on %s", lock_id, path)
        raise Timeout(path)
    if cancel_check is not None and cancel_check():
        _LOGGER.debug("Cancellation requested for lock %s on %s", lock_id, path)
        raise Timeout(path)
    if 0 <= timeout <= time.perf_counter() - start:
        _LOGGER.debug("Timeout on acquiring lock %s on %s", lock_id, path)
        raise Timeout(path)
    _LOGGER.debug("Lock %s not acquired on %s, waiting %s seconds ...", lock_id, path, poll_interval)


def _setting(attr: str, doc: str, *, in_context: bool = False, kind: Optional[Callable[[Any], Any]] = None) -> Any:
    """A property of a lock object that reads attr: the object's (an
    option as given) or, with in_context, its _Context's (shared or per
    thread, as the object is); kind makes it settable, converting the
    value as filelock does."""

    def get(self: Any) -> Any:
        return getattr(self._context if in_context else self, attr)

    def put(self: Any, value: Any) -> None:
        assert kind is not None
        setattr(self._context, attr, kind(value))

    return property(get, put if kind is not None else None, doc=doc)


class AcquireReturnProxy:
    """What ``acquire()`` returns: ``with lock.acquire():`` releases at the end."""

    def __init__(self, lock: "BaseFileLock") -> None:
        self.lock = lock

    def __enter__(self) -> "BaseFileLock":
        return self.lock

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        # As the lock's own __exit__: a failed release keeps the block's error.
        self.lock.__exit__(exc_type, exc, tb)


class BaseFileLock(contextlib.ContextDecorator, metaclass=_Meta):
    """filelock's lock object, on hold (see the module's doc). Use
    ``FileLock`` or ``SoftFileLock``."""

    #: hold's protocol for this class.
    _protocol = "flock"
    _soft = False
    _async = False
    _holder_desc = "FileLock instance in this thread"

    def __init__(
        self,
        lock_file: Union[str, "os.PathLike[str]"],
        timeout: float = -1,
        mode: int = _UNSET_MODE,
        thread_local: bool = True,
        *,
        blocking: bool = True,
        is_singleton: bool = False,
        poll_interval: float = 0.05,
        lifetime: Optional[float] = None,
        context_error_policy: str = "chain",
        close_error_policy: str = "default",
        fallback_to_soft: bool = True,
        preserve_lock_file: bool = False,
        on_acquired: Optional[Callable[[int], None]] = None,
    ) -> None:
        """Makes the lock object (nothing is locked until ``acquire``).

        ``timeout`` is the default of ``acquire`` (negative: wait as long
        as it takes; 0: one attempt); ``mode`` the lock file's permission
        bits, set exactly (not under the umask) when given; ``thread_local``
        whether each thread has its own state (counter, held lock,
        settings); ``is_singleton`` one object per path; the others as
        filelock documents them (see the module's doc for what each means
        under hold)."""
        self._context = None  # __del__ of an object whose checks failed finds nothing to release
        cls = type(self).__name__
        if context_error_policy not in _CONTEXT_ERROR_POLICIES:
            raise ValueError(f"context_error_policy must be 'chain' or 'group', got {context_error_policy!r}")
        if context_error_policy == "group" and _exception_group is None:
            raise ValueError("context_error_policy='group' requires Python 3.11+ (BaseExceptionGroup)")
        if close_error_policy not in _CLOSE_ERROR_POLICIES:
            raise ValueError(
                f"close_error_policy must be 'default', 'raise', or 'suppress', got {close_error_policy!r}"
            )
        if preserve_lock_file and self._soft:
            raise ValueError(
                f"preserve_lock_file=True is not supported by {cls}: unlinking its marker is how it releases"
            )
        if on_acquired is not None and self._soft:
            raise ValueError(f"on_acquired is not supported by {cls}: only native locks expose the lock descriptor")
        if on_acquired is not None and not callable(on_acquired):
            raise TypeError(f"on_acquired must be a callable taking the lock descriptor, not {on_acquired!r}")
        _seconds("timeout", timeout)  # a NaN is refused by a blocking acquire(), as filelock does
        _resolve_wait(0.0, poll_interval, blocking)
        if mode != _UNSET_MODE:
            if isinstance(mode, bool) or not isinstance(mode, int):
                raise TypeError(f"mode must be an int, not {type(mode).__name__}")
            if not 0 <= mode <= 0o777:
                raise ValueError(f"mode={mode:#o} must be within 0o000-0o777 for {cls}")
            if ~mode & 0o600:
                raise ValueError(f"mode={mode:#o} must grant the owner read and write for {cls}")
        lifetime = _ignored_lifetime(lifetime, cls, 4 + self._async)  # the caller's line, past the async __init__
        # The options as given, as _opt_NAME: what is_singleton compares (_Meta).
        given = (bool(thread_local), timeout, mode, blocking, poll_interval, lifetime, context_error_policy,
                 close_error_policy, fallback_to_soft, preserve_lock_file)
        for name, value in zip(_SINGLETON_OPTIONS, given):
            setattr(self, "_opt_" + name, value)
        self._is_singleton = is_singleton
        self._on_acquired = on_acquired
        self._mu = threading.RLock()
        make = _ThreadLocalContext if thread_local else _Context
        self._context = make(os.fspath(lock_file), timeout, mode, blocking, poll_interval, lifetime)
        _all_locks.add(self)

    def _forget_parent(self) -> None:
        """In a child made by fork(): the parent's hold is not this
        process's, so this object starts released (see _forget_after_fork)."""
        self._mu = threading.RLock()
        self._inherited = True
        ctx = self._context
        if ctx is None:
            return
        fd, ctx.held, ctx.fd, ctx.lock_counter = ctx.fd, None, None, 0
        self._held_key = None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    # The settings, as filelock reports them.

    def is_thread_local(self) -> bool:
        """Whether each thread has its own state of this lock."""
        return self._opt_thread_local

    is_singleton = _setting("_is_singleton", "Whether this is the one object of its path (``is_singleton=True``).")
    context_error_policy = _setting(
        "_opt_context_error_policy",
        """``"chain"``: a release error at the end of a ``with`` raises with the
        body's error as its context; ``"group"``: both in an exception group.""",
    )
    close_error_policy = _setting(
        "_opt_close_error_policy", "What closing the descriptor lent to ``on_acquired`` does with an error."
    )
    fallback_to_soft = _setting("_opt_fallback_to_soft", "Kept as given: hold never changes protocol by itself.")
    preserve_lock_file = _setting(
        "_opt_preserve_lock_file", "Kept as given: a kernel lock's file is never unlinked on release."
    )
    on_acquired = _setting(
        "_on_acquired", "The callback run with a descriptor of the lock file at each first acquisition."
    )
    lock_file = _setting("lock_file", "The path of the lock file.", in_context=True)
    timeout = _setting("timeout", "The default timeout of ``acquire``, in seconds.", in_context=True,
                       kind=lambda v: _timeout_setting(v))
    blocking = _setting("blocking", "The default ``blocking`` of ``acquire``.", in_context=True,
                        kind=lambda v: _resolve_wait(0.0, 0.0, v)[2])
    poll_interval = _setting(
        "poll_interval",
        """The default ``poll_interval`` of ``acquire``, in seconds: how often
        ``cancel_check`` is asked (hold's own waits do not poll).""",
        in_context=True,
        kind=lambda v: _resolve_wait(0.0, v, True)[1],
    )
    @property
    def lifetime(self) -> Optional[float]:
        """Always None under hold: a lock is never broken by its age while
        its holder lives (see the module's doc). Setting it checks the
        value as filelock does and warns that it is ignored."""
        return self._context.lifetime

    @lifetime.setter
    def lifetime(self, value: Optional[float]) -> None:
        self._context.lifetime = _ignored_lifetime(value, type(self).__name__, 3)

    @property
    def mode(self) -> int:
        """The lock file's permission bits (0o644 when not given, as filelock reports)."""
        return 0o644 if self._context.mode == _UNSET_MODE else self._context.mode

    @property
    def has_explicit_mode(self) -> bool:
        """Whether ``mode`` was given."""
        return self._context.mode != _UNSET_MODE

    @property
    def is_locked(self) -> bool:
        """Whether this object (in this thread, if thread-local) holds the lock."""
        return self._context.held is not None

    @property
    def lock_counter(self) -> int:
        """How many acquisitions of this object are not yet released."""
        return self._context.lock_counter

    # Taking and giving up.

    def _options(self, timeout: Optional[float], poll_interval: Optional[float], poll_intervall: Optional[float],
                 blocking: Optional[bool]) -> Tuple[float, float, bool]:
        ctx = self._context
        if timeout is None:
            timeout = ctx.timeout
        if blocking is None:
            blocking = ctx.blocking
        if poll_intervall is not None:
            warnings.warn("use poll_interval instead of poll_intervall", DeprecationWarning, stacklevel=3)
            poll_interval = poll_intervall
        if poll_interval is None:
            poll_interval = ctx.poll_interval
        return _resolve_wait(timeout, poll_interval, blocking)

    def _hold_kwargs(self) -> Dict[str, Any]:
        mode = self._context.mode
        # filelock makes the lock file's missing directories; hold.lock()
        # does only when asked (docs/cli.md, "Missing directories"), and
        # this is filelock's API, so it asks.
        kw: Dict[str, Any] = {"lock_file": self._context.lock_file, "protocol": self._protocol, "make_dirs": True}
        if self._soft:
            # The portable protocol's file form: a file in filelock's own
            # SoftFileLock format, which filelock's SoftFileLock in other
            # processes waits for (a lock directory makes it fail).
            kw["soft_file"] = True
        if mode != _UNSET_MODE and mode & 0o777:
            kw["mode"] = mode & 0o777
        return kw

    def _deadlock(self, cause: Optional[BaseException]) -> Deadlock:
        err = Deadlock(
            f"Deadlock: lock '{self.lock_file}' is already held by a different {self._holder_desc}. "
            "Use is_singleton=True to enable reentrant locking across instances.",
            holder=getattr(cause, "holder", None),
            hint=getattr(cause, "hint", None),
        )
        return err

    def acquire(
        self,
        timeout: Optional[float] = None,
        poll_interval: Optional[float] = None,
        *,
        poll_intervall: Optional[float] = None,
        blocking: Optional[bool] = None,
        cancel_check: Optional[Callable[[], bool]] = None,
    ) -> AcquireReturnProxy:
        """Takes the lock, or counts up if this object holds it already.

        ``timeout``: None uses the object's; negative waits as long as it
        takes; otherwise ``Timeout`` when it runs out. ``blocking=False``
        makes one attempt. ``cancel_check`` is asked every ``poll_interval``
        seconds; when it returns True the wait ends with ``Timeout``. Returns
        a proxy for ``with lock.acquire():``."""
        timeout, poll_interval, blocking = self._options(timeout, poll_interval, poll_intervall, blocking)
        ctx = self._context
        shared = not self._opt_thread_local
        if shared and not self._mu.acquire(*_mutex_wait(blocking, timeout, cancel_check)):
            # Another thread of this shared object is taking or releasing
            # it: this acquisition's own timeout bounds that wait too.
            raise Timeout(ctx.lock_file)
        try:
            ctx.lock_counter += 1
            try:
                if ctx.held is None:
                    run(self._take_steps(timeout, poll_interval, blocking, cancel_check), _perform)
            except BaseException:
                ctx.lock_counter = max(0, ctx.lock_counter - 1)
                raise
        finally:
            if shared:
                self._mu.release()
        return AcquireReturnProxy(lock=self)

    #: Which lock object holds the path in the caller's asyncio task (the
    #: async classes: see _task_holders); None for the thread classes,
    #: whose agent tells a lock held by another object of the thread.
    _held_key: Optional[Tuple[int, str]] = None

    #: Made in the parent of this process (a fork() child's): refuses to
    #: acquire, as filelock's objects do there (see _forget_after_fork).
    _inherited = False

    def _holder_key(self, path: str) -> Optional[Tuple[int, str]]:
        return None

    def _take_steps(self, timeout: float, poll_interval: float, blocking: bool,
                    cancel_check: Optional[Callable[[], bool]]) -> "Steps[None]":
        """The acquisition, as filelock makes it: attempts until one gets
        the lock, the wait is spent or cancel_check says to stop; one core
        for the thread classes and the asyncio ones (see hold._steps)."""
        ctx = self._context
        path = ctx.lock_file
        if self._inherited:
            raise RuntimeError(f"{type(self).__name__} on {path} was inherited across fork; construct a new instance")
        kw = ctx.kw
        if kw is None:
            _check_path(path, self._soft)
            kw = ctx.kw = self._hold_kwargs()
        lock_id = id(self)
        key = self._holder_key(path)
        start = time.perf_counter()
        while True:
            _LOGGER.debug("Attempting to acquire lock %s on %s", lock_id, path)
            wait = _attempt_wait(blocking, timeout, time.perf_counter() - start, poll_interval, cancel_check)
            try:
                if ctx.held is None:  # else another task of a shared object took it meanwhile
                    if key is not None and _task_holders.get(key, lock_id) != lock_id:
                        # This task holds it in another object, which it
                        # cannot release while it waits here.
                        raise self._deadlock(None)
                    held = yield _Take(wait, kw, ctx.requests)
                    if ctx.held is not None:  # another task of a shared object got there first
                        yield _Release(held)
                    else:
                        self._acquired(held)
                        self._held_key = key
                        if key is not None:
                            _task_holders[key] = lock_id
            except (_errors.Busy, _errors.Timeout):
                pass
            except Deadlock as e:
                # Another object of this thread (task) holds it: filelock
                # waits out a finite timeout, and an endless wait could never end.
                # A cancel_check does not make it end: filelock raises its
                # deadlock error for it too.
                if blocking and timeout < 0:
                    raise self._deadlock(e) from e
                if wait:
                    yield _Sleep(min(wait, poll_interval))
            else:
                if self._on_acquired is not None and ctx.fd is not None:
                    try:
                        yield _Callback(self, ctx.fd)
                    except BaseException:
                        yield from self._give_up()
                        raise
                _LOGGER.debug("Lock %s acquired on %s", lock_id, path)
                return
            _missed(lock_id, path, blocking, timeout, start, poll_interval, cancel_check)

    def _acquired(self, held: Any) -> None:
        """Records the hold.Lock; applies an explicit mode exactly and opens
        the descriptor for on_acquired (which _take_steps then calls: in
        an executor for the async classes), releasing again if that fails."""
        ctx = self._context
        ctx.held = held
        try:
            if ctx.mode != _UNSET_MODE:
                with contextlib.suppress(PermissionError):  # a lock file of another user keeps its mode
                    os.chmod(ctx.lock_file, ctx.mode)
            if self._on_acquired is not None:
                ctx.fd = os.open(ctx.lock_file, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
        except BaseException:
            # A release on the synchronous channel is written, not waited
            # for: this never blocks an event loop for long.
            run(self._give_up(), _perform)
            raise

    def _close_fd(self, fd: Optional[int]) -> None:
        """Closes the descriptor opened for on_acquired, if any; a failure
        is raised only under close_error_policy "raise"."""
        if fd is None:
            return
        try:
            os.close(fd)
        except OSError:
            if self._opt_close_error_policy == "raise":
                raise

    def _give_up(self) -> "Steps[None]":
        """Lets the lock go, whatever the counter says."""
        ctx = self._context
        held, fd = ctx.held, ctx.fd
        ctx.held, ctx.fd, ctx.lock_counter = None, None, 0
        key, self._held_key = self._held_key, None
        if key is not None and _task_holders.get(key) == id(self):
            del _task_holders[key]
        try:
            self._close_fd(fd)
        finally:
            yield _Release(held)

    def _release_steps(self, force: bool) -> "Steps[None]":
        """release(): counts down; gives the lock up at 0, or with force."""
        ctx = self._context
        if ctx is None or ctx.held is None:
            return
        if not force and ctx.lock_counter > 1:
            ctx.lock_counter -= 1
            return
        lock_id, path = id(self), ctx.lock_file
        _LOGGER.debug("Attempting to release lock %s on %s", lock_id, path)
        yield from self._give_up()
        _LOGGER.debug("Lock %s released on %s", lock_id, path)

    def release(self, force: bool = False) -> None:
        """Counts down; gives the lock up when the count reaches 0, or at
        once with ``force``. Does nothing if this object does not hold it."""
        if self._context is None:
            return
        with self._mu if not self._opt_thread_local else contextlib.nullcontext():
            run(self._release_steps(force), _perform)

    def __enter__(self) -> "BaseFileLock":
        self.acquire()
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        try:
            self.release()
        except BaseException as release_error:
            _raise_in_context(release_error, exc, self._opt_context_error_policy)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release(force=True)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.lock_file!r} {'locked' if self.is_locked else 'unlocked'}>"


def _raise_in_context(release_error: BaseException, body_error: Optional[BaseException], policy: str) -> None:
    """Raises the error of a release at the end of a with block, as
    context_error_policy says: itself ("chain", or when the body did not
    fail), or with the body's in an exception group ("group")."""
    if body_error is None or policy == "chain":
        raise release_error
    assert _exception_group is not None  # checked when the lock was made
    errors = (body_error, release_error)
    _cut_contexts(errors)
    raise _exception_group("lock body and release both failed", list(errors)) from None


def _cut_contexts(roots: Tuple[BaseException, ...]) -> None:
    """Detaches, in the errors about to be grouped and in what they chain
    to, every implicit context that is one of those errors or lies inside
    one: the release error raised while the body's propagated has the
    body's error as its context, and a group holding both would make a
    cycle that tracebacks walk forever (as filelock, which cuts them too)."""
    inside: set = set()
    todo: list = list(roots)
    while todo:  # the roots, and the members of the groups among them
        e = todo.pop()
        if id(e) in inside:
            continue
        inside.add(id(e))
        todo.extend(getattr(e, "exceptions", ()))
    seen: set = set()
    todo = list(roots)
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        ctx = e.__context__
        if ctx is not None and (ctx is e or id(ctx) in inside):
            e.__context__ = None
        todo.extend(x for x in (ctx, e.__cause__) if x is not None)
        todo.extend(getattr(e, "exceptions", ()))


# The steps of an acquisition and a release (see hold._steps).


class _Take:
    """A step: one hold.lock() of the lock file, waiting wait seconds at
    most: its request is hold.lock()'s for kw, checked once for an endless
    wait and for none (kept in requests, the object's), and for every
    attempt of a finite one, whose remaining time changes."""

    __slots__ = ("wait", "req")

    def __init__(self, wait: Optional[float], kw: Dict[str, Any], requests: Dict[Optional[float], Dict[str, Any]]) -> None:
        self.wait = wait
        req = requests.get(wait)
        if req is None:
            req = _hold_request(None, timeout=wait, **kw)
            if wait is None or wait == 0:
                requests[wait] = req
        self.req = req


class _Sleep:
    """A step: a pause between attempts."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


class _Release:
    """A step: the release of a hold.Lock."""

    __slots__ = ("held",)

    def __init__(self, held: Any) -> None:
        self.held = held


class _Callback:
    """A step: on_acquired, called with the lock file's descriptor."""

    __slots__ = ("lock", "fd")

    def __init__(self, lock: Any, fd: int) -> None:
        self.lock, self.fd = lock, fd


def _perform(step: Any) -> Any:
    """Performs a step, blocking the thread."""
    if type(step) is _Take:
        return _hold_take("acquire", step.req)
    if type(step) is _Sleep:
        return time.sleep(step.seconds)
    if type(step) is _Callback:
        return step.lock._on_acquired(step.fd)
    return step.held.release()


async def _aperform(step: Any) -> Any:
    """Performs a step without blocking the event loop."""
    if type(step) is _Take:
        return await _HoldAsyncAcquire(step.req)
    if type(step) is _Sleep:
        return await _aio.sleep(step.seconds)
    if type(step) is _Callback:
        # As filelock: the callback may block (it gets a file to write),
        # so it runs in the lock's executor unless run_in_executor=False.
        lock = step.lock
        if not lock.run_in_executor:
            return lock._on_acquired(step.fd)
        loop = lock.loop or _aio.get_running_loop()
        return await loop.run_in_executor(lock.executor, lock._on_acquired, step.fd)
    return await step.held._arelease()


class FileLock(BaseFileLock):
    """filelock's FileLock: the kernel lock (flock) on ``lock_file``,
    which filelock's own FileLock excludes and is excluded by."""


class SoftFileLock(BaseFileLock):
    """filelock's SoftFileLock: hold's portable protocol at ``lock_file``,
    for filesystems where kernel locks do not reach every host."""

    _protocol = "dir"
    _soft = True


# asyncio.


class AsyncAcquireReturnProxy:
    """What an async ``acquire()`` returns: ``async with lock.acquire():``."""

    def __init__(self, lock: "BaseAsyncFileLock") -> None:
        self.lock = lock

    async def __aenter__(self) -> "BaseAsyncFileLock":
        return self.lock

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        await self.lock.__aexit__(exc_type, exc, tb)


#: Which lock object of a task holds each path: (task, canonical path) -> id.
_task_holders: Dict[Tuple[int, str], int] = {}


def _task_key(path: str) -> Optional[Tuple[int, str]]:
    try:
        task = _aio.current_task()
    except RuntimeError:
        return None
    return None if task is None else (id(task), _canonical(path))


class BaseAsyncFileLock(BaseFileLock):
    """filelock's async lock object, on hold: ``acquire`` and ``release``
    are awaited, and the waits never block the event loop. Shared between
    tasks by default (``thread_local=False``)."""

    _async = True
    _holder_desc = "lock instance in this task"

    def __init__(
        self, lock_file: Union[str, "os.PathLike[str]"], timeout: float = -1, mode: int = _UNSET_MODE,
        thread_local: bool = False, *, loop: Optional[_aio.AbstractEventLoop] = None,
        run_in_executor: bool = True, executor: Any = None, **options: Any,
    ) -> None:
        """As ``BaseFileLock``, with its keyword options (``blocking``,
        ``is_singleton``, ...); ``loop``, ``run_in_executor`` and
        ``executor`` are kept and reported (no executor is needed)."""
        self._context = None  # __del__ of an object whose checks failed finds nothing to release
        if thread_local and run_in_executor:
            raise ValueError("run_in_executor is not supported when thread_local is True")
        self._extra = {"loop": loop, "run_in_executor": run_in_executor, "executor": executor}
        super().__init__(lock_file, timeout, mode, thread_local, **options)

    def _holder_key(self, path: str) -> Optional[Tuple[int, str]]:
        return _task_key(path)

    @property
    def run_in_executor(self) -> bool:
        """Kept as given (hold does not need an executor)."""
        return bool(self._extra.get("run_in_executor", True))

    @property
    def executor(self) -> Any:
        """Kept as given (hold does not need an executor)."""
        return self._extra.get("executor")

    @property
    def loop(self) -> Optional[_aio.AbstractEventLoop]:
        """Kept as given."""
        return self._extra.get("loop")

    async def acquire(  # type: ignore[override]
        self,
        timeout: Optional[float] = None,
        poll_interval: Optional[float] = None,
        *,
        blocking: Optional[bool] = None,
        cancel_check: Optional[Callable[[], bool]] = None,
    ) -> AsyncAcquireReturnProxy:
        """``BaseFileLock.acquire``, awaited. A second object in the same
        task waits out a finite timeout (``Timeout``), as filelock's does;
        an endless wait raises ``hold.Deadlock`` at once."""
        timeout, poll_interval, blocking = self._options(timeout, poll_interval, None, blocking)
        ctx = self._context
        if ctx.held is None:
            # Counted once taken: a task of a shared object that waits here
            # meanwhile must not keep a holder's release from releasing.
            await arun(self._take_steps(timeout, poll_interval, blocking, cancel_check), _aperform)
        ctx.lock_counter += 1
        return AsyncAcquireReturnProxy(lock=self)

    async def release(self, force: bool = False) -> None:  # type: ignore[override]
        """``BaseFileLock.release``, awaited."""
        await arun(self._release_steps(force), _aperform)

    def __enter__(self) -> "BaseFileLock":
        raise NotImplementedError("Do not use `with` for asyncio locks, use `async with` instead.")

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        raise NotImplementedError("Do not use `with` for asyncio locks, use `async with` instead.")

    async def __aenter__(self) -> "BaseAsyncFileLock":
        await self.acquire()
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        try:
            await self.release()
        except BaseException as release_error:
            _raise_in_context(release_error, exc, self._opt_context_error_policy)

    def __del__(self) -> None:
        ctx = getattr(self, "_context", None)
        if ctx is None or ctx.held is None:
            return
        held, ctx.held = ctx.held, None
        with contextlib.suppress(Exception):
            held.release()


class AsyncFileLock(BaseAsyncFileLock, FileLock):
    """filelock's AsyncFileLock: FileLock for asyncio."""


class AsyncSoftFileLock(BaseAsyncFileLock, SoftFileLock):
    """filelock's AsyncSoftFileLock: SoftFileLock for asyncio."""

    _protocol = "dir"
    _soft = True


# Read-write locks.

#: Readers and writers of a ReadWriteLock wait in hold's fair queue: a
#: writer waiting there keeps its place at the front until it holds the
#: lock, so readers that come after it wait behind it instead of starving
#: it, as filelock prefers its writers (docs/fair.md). Not on Windows,
#: which has no fair queue: there the kernel's order rules.
_RW_FAIR = os.name != "nt"

#: How an SQLite database file starts: the lock file of filelock's own
#: ReadWriteLock, which hold's cannot exclude (see the module's doc).
_SQLITE_HEADER = b"SQLite format 3\x00"


def _refuse_sqlite(path: str) -> None:
    """Refuses a lock file that filelock's ReadWriteLock made: its holders
    hold SQLite transactions in it, which hold's kernel locks do not see."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(_SQLITE_HEADER))
    except OSError:
        return  # missing, or not readable: the lock's own error says so
    if head == _SQLITE_HEADER:
        raise ValueError(
            f"{path} is an SQLite database, the lock file of filelock's ReadWriteLock: its holders hold SQLite "
            "transactions, which hold's kernel locks neither see nor exclude; switch every process that locks "
            "it to hold.filelock, and give hold's ReadWriteLock a file of its own (or remove this one once no "
            "process of filelock uses it)"
        )


def _claim(path: str) -> None:
    """Gives a lock file that is missing or empty hold's owner record, by
    taking and releasing its write lock once, if it is free: filelock's
    ReadWriteLock then refuses the file (it is not an SQLite database),
    where it would take an empty one that only hold's readers have locked,
    without excluding them. A failure here is left for the acquisition to
    report."""
    try:
        if os.path.getsize(path) > 0:
            return
    except OSError:
        pass
    with contextlib.suppress(_errors.HoldError):
        held = _hold_try_lock(lock_file=path, make_dirs=True)
        try:
            held.token  # the record is written when the token is first read
        finally:
            held.release()


class _ReadWriteMeta(type):
    """Makes ``is_singleton=True`` (ReadWriteLock's default, as filelock's)
    return the one live object of a path, refusing other defaults."""

    def __call__(cls, lock_file: Union[str, "os.PathLike[str]"], timeout: float = -1, *, blocking: bool = True,
                 is_singleton: bool = True, **extra: Any) -> Any:
        if not is_singleton:
            return super().__call__(lock_file, timeout, blocking=blocking, **extra)
        obj, _ = _singleton(
            cls, lock_file, lambda: super(_ReadWriteMeta, cls).__call__(lock_file, timeout, blocking=blocking, **extra)
        )
        if (obj.timeout < 0) != (timeout < 0) or (timeout >= 0 and obj.timeout != timeout) or obj.blocking != blocking:
            raise ValueError(
                f"Singleton lock created with timeout={obj.timeout}, blocking={obj.blocking}, "
                f"cannot be changed to timeout={timeout}, blocking={blocking}"
            )
        return obj



def _check_wait_defaults(timeout: Any, blocking: Any) -> None:
    """Refuses, as filelock does, a ``blocking`` that is not a bool and a
    ``timeout`` that is not a number of seconds."""
    if not isinstance(blocking, bool):
        raise TypeError(f"blocking must be a bool, not {type(blocking).__name__}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout != timeout:
        raise ValueError(f"timeout must be a number of seconds, not {timeout!r}")


class ReadWriteLock(metaclass=_ReadWriteMeta):
    """filelock's ReadWriteLock, on hold: ``read_lock()`` holds a shared
    lock, which readers in any number of processes hold together;
    ``write_lock()`` an exclusive one, held alone. They are hold's shared
    and exclusive kernel locks (flock) of ``lock_file`` exactly, the ones
    ``hold.lock(lock_file=..., shared=...)``, ``hold run --shared`` and
    flock(1) ``-s`` take, so all of those exclude each other; not filelock's
    own ReadWriteLock, whose lock file is an SQLite database (refused here:
    see the module's doc).

    As filelock's: one object per path unless ``is_singleton=False``; a
    thread may take the mode it holds again (each acquisition needs its
    release), a read lock's levels are shared by the threads of the
    object, a write lock is its thread's alone, and changing mode raises
    ``RuntimeError``; ``timeout`` (seconds, -1: as long as it takes) and
    ``blocking`` are the defaults of each acquisition, which raises
    ``Timeout`` when it cannot get the lock."""

    def __init__(self, lock_file: Union[str, "os.PathLike[str]"], timeout: float = -1, *,
                 blocking: bool = True, is_singleton: bool = True) -> None:
        _check_wait_defaults(timeout, blocking)
        #: The lock file (filelock's attribute).
        self.lock_file = os.fspath(lock_file)
        #: The default timeout of an acquisition, in seconds (-1: as long as it takes).
        self.timeout = timeout
        #: Whether an acquisition waits by default.
        self.blocking = blocking
        self._mu = threading.Lock()  # the state below
        self._taking = threading.Lock()  # one acquisition of the hold lock at a time
        self._held: Any = None  # the hold.Lock while held
        self._mode: Optional[str] = None  # "read" or "write"
        self._level = 0
        self._writer: Optional[int] = None
        self._readers: Dict[int, int] = {}
        self._closed = False
        _refuse_sqlite(self.lock_file)
        _claim(self.lock_file)
        _all_locks.add(self)

    def _forget_parent(self) -> None:
        """In a child made by fork(): starts released (see _forget_after_fork)."""
        self._mu, self._taking = threading.Lock(), threading.Lock()
        self._clear_lock_state()

    def _clear_lock_state(self) -> None:
        """Forgets the hold and every level, without releasing anything."""
        self._held, self._mode, self._level, self._writer, self._readers = None, None, 0, None, {}

    @classmethod
    def get_lock(cls, lock_file: Union[str, "os.PathLike[str]"], timeout: float = -1, *,
                 blocking: bool = True) -> "ReadWriteLock":
        """The one object of this path (filelock's spelling)."""
        return cls(lock_file, timeout, blocking=blocking)  # type: ignore[no-any-return]

    def read_lock(self, timeout: Optional[float] = None, *, blocking: Optional[bool] = None) -> ContextManager[None]:
        """Holds a read (shared) lock for the ``with`` block."""
        return self._holding("read", timeout, blocking)

    def write_lock(self, timeout: Optional[float] = None, *, blocking: Optional[bool] = None) -> ContextManager[None]:
        """Holds the write (exclusive) lock for the ``with`` block."""
        return self._holding("write", timeout, blocking)

    @contextlib.contextmanager
    def _holding(self, mode: str, timeout: Optional[float], blocking: Optional[bool]) -> Iterator[None]:
        self._acquire(mode, timeout, blocking)
        try:
            yield
        finally:
            self.release()

    def acquire_read(self, timeout: Optional[float] = None, *, blocking: Optional[bool] = None) -> AcquireReturnProxy:
        """Takes a read lock (or one more level of it); ``with`` on the
        returned proxy releases it. ``Timeout`` if it cannot be had in time."""
        return self._acquire("read", timeout, blocking)

    def acquire_write(self, timeout: Optional[float] = None, *, blocking: Optional[bool] = None) -> AcquireReturnProxy:
        """Takes the write lock (or one more level of it, in its thread)."""
        return self._acquire("write", timeout, blocking)

    def _acquire(self, mode: str, timeout: Optional[float], blocking: Optional[bool]) -> AcquireReturnProxy:
        timeout = self.timeout if timeout is None else timeout
        blocking = self.blocking if blocking is None else blocking
        me = threading.get_ident()
        start = time.perf_counter()
        if self._closed:
            raise RuntimeError(f"ReadWriteLock on {self.lock_file} is closed")
        if self._nest(mode, me):
            return AcquireReturnProxy(lock=self)  # type: ignore[arg-type]
        left = -1 if timeout < 0 else timeout
        if not self._taking.acquire(blocking, left):
            raise Timeout(self.lock_file)
        try:
            if self._nest(mode, me):  # another thread took it meanwhile
                return AcquireReturnProxy(lock=self)  # type: ignore[arg-type]
            _refuse_sqlite(self.lock_file)
            held = self._take(mode, timeout, blocking, start)
            with self._mu:
                self._held, self._mode, self._level = held, mode, 1
                self._writer, self._readers = (me, {}) if mode == "write" else (None, {me: 1})
        finally:
            self._taking.release()
        return AcquireReturnProxy(lock=self)  # type: ignore[arg-type]

    def _nest(self, mode: str, me: int) -> bool:
        """One more level of the held lock, if it is held: False if not;
        RuntimeError if it cannot be had in this mode or thread."""
        with self._mu:
            if self._level == 0:
                return False
            if self._mode != mode:
                opposite = "write" if mode == "read" else "read"
                if me == self._writer or me in self._readers:
                    reason = f"already holding a {opposite} lock ({'downgrade' if mode == 'read' else 'upgrade'} not allowed)"
                else:
                    reason = (f"another thread holds a {opposite} lock on this instance, which coordinates processes "
                              "rather than threads; give each thread its own instance with is_singleton=False")
                raise RuntimeError(f"Cannot acquire {mode} lock on {self.lock_file} (lock id: {id(self)}): {reason}")
            if mode == "write" and me != self._writer:
                raise RuntimeError(
                    f"Cannot acquire write lock on {self.lock_file} (lock id: {id(self)}) "
                    f"from thread {me} while it is held by thread {self._writer}"
                )
            if mode == "read":
                self._readers[me] = self._readers.get(me, 0) + 1
            self._level += 1
            return True

    def _take(self, mode: str, timeout: float, blocking: bool, start: float) -> Any:
        """The hold lock, shared for "read": waited for as filelock waits
        (a lock this thread holds on another object is waited out for a
        finite timeout, and raises ``hold.Deadlock`` for an endless one)."""
        kw: Dict[str, Any] = {"lock_file": self.lock_file, "shared": mode == "read", "make_dirs": True,
                              "fair": _RW_FAIR}
        while True:
            wait = _attempt_wait(blocking, timeout, time.perf_counter() - start, 0.05, None)
            try:
                return _hold_lock(None, timeout=wait, **kw)
            except (_errors.Busy, _errors.Timeout):
                raise Timeout(self.lock_file) from None
            except Deadlock:
                if blocking and timeout < 0:
                    raise
                if not wait:
                    raise Timeout(self.lock_file) from None
                time.sleep(min(wait, 0.05))

    def release(self, *, force: bool = False) -> None:
        """Releases one level this thread holds; the lock goes with the
        last. ``force`` releases every level, of every thread.
        ``RuntimeError`` if this thread holds none (and not force)."""
        me = threading.get_ident()
        with self._mu:
            if not force:
                if self._mode == "write" and me != self._writer:
                    raise RuntimeError(
                        f"Cannot release write lock on {self.lock_file} (lock id: {id(self)}) "
                        f"from thread {me} while it is held by thread {self._writer}"
                    )
                if self._mode == "read" and me not in self._readers:
                    raise RuntimeError(
                        f"Cannot release read lock on {self.lock_file} (lock id: {id(self)}) "
                        f"from thread {me}, which does not hold it"
                    )
                if self._level == 0:
                    raise RuntimeError(
                        f"Cannot release a lock on {self.lock_file} (lock id: {id(self)}) that is not held"
                    )
                if self._level > 1:
                    self._level -= 1
                    if self._mode == "read":
                        depth = self._readers.pop(me) - 1
                        if depth:
                            self._readers[me] = depth
                    return
            held, self._held, self._mode, self._level = self._held, None, None, 0
            self._writer, self._readers = None, {}
        if held is not None:
            held.release()

    def close(self) -> None:
        """Releases every level, of every thread, and closes the object:
        acquisitions then raise ``RuntimeError``."""
        self.release(force=True)
        self._closed = True

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.release(force=True)


class _AsyncRWState:
    """What the AsyncReadWriteLock objects of one path share (one object's
    own with ``is_singleton=False``): the hold lock, its mode, the levels
    each task holds, and the tasks waiting for a change."""

    def __init__(self) -> None:
        self.held: Any = None  # the hold.Lock while held
        self.mode: Optional[str] = None  # "read" or "write" while held
        self.owners: Dict[Any, int] = {}  # task -> levels held
        self.taking = False  # a task is taking the hold lock
        self.writers = 0  # tasks waiting for the write lock
        self.waiters: list = []  # futures, woken at every change

    def changed(self) -> None:
        waiters, self.waiters = self.waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    async def wait(self, deadline: Optional[float]) -> bool:
        """Waits for a change until deadline (perf_counter); False if it
        passed first."""
        left = None if deadline is None else deadline - time.perf_counter()
        if left is not None and left <= 0:
            return False
        fut = _aio.get_running_loop().create_future()
        self.waiters.append(fut)
        done, _ = await _aio.wait({fut}, timeout=left)
        if not done:
            fut.cancel()
            return False
        return True


#: The shared state of the singleton AsyncReadWriteLock objects, by path.
_async_rw_states: "WeakValueDictionary[str, _AsyncRWState]" = WeakValueDictionary()


class AsyncAcquireReadWriteReturnProxy:
    """What AsyncReadWriteLock's ``acquire_read`` and ``acquire_write``
    return: ``async with`` on it releases the level taken."""

    def __init__(self, lock: "AsyncReadWriteLock") -> None:
        self.lock = lock

    async def __aenter__(self) -> "AsyncReadWriteLock":
        return self.lock

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        await self.lock.release()


class AsyncReadWriteLock:
    """filelock's AsyncReadWriteLock, on hold: ReadWriteLock for asyncio,
    on the same shared and exclusive kernel locks of ``lock_file``, so it,
    ReadWriteLock, ``hold.lock(lock_file=..., shared=...)`` and flock(1)
    exclude each other across processes. No wait blocks the event loop.

    As filelock's: each task holds its own levels; tasks share a read
    lock, which is one shared kernel lock held while any of them holds it;
    a task asking for the write lock waits until the other tasks have let
    go, and while it waits new readers wait behind it; a task may take the
    mode it holds again (each acquisition needs its release), and changing
    mode raises ``RuntimeError``. Objects of one path share their tasks'
    holds unless ``is_singleton=False``. ``timeout`` (seconds, -1: as long
    as it takes) and ``blocking`` are each acquisition's defaults;
    ``Timeout`` when the lock cannot be had. ``loop`` and ``executor`` are
    kept and reported: hold's waits need no executor."""

    def __init__(self, lock_file: Union[str, "os.PathLike[str]"], timeout: float = -1, *, blocking: bool = True,
                 is_singleton: bool = True, loop: Optional[_aio.AbstractEventLoop] = None,
                 executor: Any = None) -> None:
        _check_wait_defaults(timeout, blocking)
        self._lock_file = os.fspath(lock_file)
        self._timeout = timeout
        self._blocking = blocking
        self._loop = loop
        self._executor = executor
        self._closed = False
        _refuse_sqlite(self._lock_file)
        _claim(self._lock_file)
        state: Optional[_AsyncRWState] = None
        if is_singleton:
            key = _canonical(self._lock_file)
            with _singleton_mu:
                state = _async_rw_states.get(key)
                if state is None:
                    state = _async_rw_states[key] = _AsyncRWState()
        self._state = state or _AsyncRWState()

    @property
    def lock_file(self) -> str:
        """The lock file."""
        return self._lock_file

    @property
    def timeout(self) -> float:
        """The default timeout of an acquisition, in seconds (-1: as long as it takes)."""
        return self._timeout

    @property
    def blocking(self) -> bool:
        """Whether an acquisition waits by default."""
        return self._blocking

    @property
    def loop(self) -> Optional[_aio.AbstractEventLoop]:
        """The loop given, if any (hold needs none: see the class's doc)."""
        return self._loop

    @property
    def executor(self) -> Any:
        """The executor given, if any (never used: hold's waits need none)."""
        return self._executor

    @contextlib.asynccontextmanager
    async def read_lock(self, timeout: Optional[float] = None, *, blocking: Optional[bool] = None) -> Any:
        """Holds a read (shared) lock for the ``async with`` block."""
        await self.acquire_read(timeout, blocking=blocking)
        try:
            yield
        finally:
            await self.release()

    @contextlib.asynccontextmanager
    async def write_lock(self, timeout: Optional[float] = None, *, blocking: Optional[bool] = None) -> Any:
        """Holds the write (exclusive) lock for the ``async with`` block."""
        await self.acquire_write(timeout, blocking=blocking)
        try:
            yield
        finally:
            await self.release()

    async def acquire_read(self, timeout: Optional[float] = None, *,
                           blocking: Optional[bool] = None) -> AsyncAcquireReadWriteReturnProxy:
        """Takes a read lock (or one more level of it, in this task)."""
        await self._acquire("read", timeout, blocking)
        return AsyncAcquireReadWriteReturnProxy(self)

    async def acquire_write(self, timeout: Optional[float] = None, *,
                            blocking: Optional[bool] = None) -> AsyncAcquireReadWriteReturnProxy:
        """Takes the write lock (or one more level of it, in this task)."""
        await self._acquire("write", timeout, blocking)
        return AsyncAcquireReadWriteReturnProxy(self)

    async def _acquire(self, mode: str, timeout: Optional[float], blocking: Optional[bool]) -> None:
        if self._closed:
            raise RuntimeError(f"AsyncReadWriteLock on {self._lock_file} is closed")
        timeout = self._timeout if timeout is None else timeout
        blocking = self._blocking if blocking is None else blocking
        deadline = None if blocking and timeout < 0 else time.perf_counter() + (timeout if blocking else 0)
        st, me = self._state, _aio.current_task()
        if st.owners.get(me):
            if st.mode != mode:
                reason = "downgrade" if mode == "read" else "upgrade"
                raise RuntimeError(
                    f"Cannot acquire {mode} lock on {self._lock_file} (lock id: {id(self)}): already holding a "
                    f"{st.mode} lock ({reason} not allowed)"
                )
            st.owners[me] += 1
            return
        if mode == "write":
            st.writers += 1
        try:
            while True:
                if st.mode is None and not st.taking and (mode == "write" or not st.writers):
                    await self._take(mode, deadline)
                    st.owners[me] = 1
                    return
                if mode == "read" and st.mode == "read" and not st.writers and not st.taking:
                    st.owners[me] = 1  # shares the read lock held
                    return
                if not await st.wait(deadline):
                    raise Timeout(self._lock_file)
        finally:
            if mode == "write":
                st.writers -= 1
                st.changed()

    async def _take(self, mode: str, deadline: Optional[float]) -> None:
        """Takes the hold lock for the object's tasks."""
        st = self._state
        st.taking = True
        try:
            wait = None if deadline is None else max(0.0, deadline - time.perf_counter())
            try:
                st.held = await _hold_alock(None, lock_file=self._lock_file, shared=mode == "read", make_dirs=True,
                                            fair=_RW_FAIR, timeout=wait)
            except (_errors.Busy, _errors.Timeout):
                raise Timeout(self._lock_file) from None
            st.mode = mode
        finally:
            st.taking = False
            st.changed()

    async def release(self, *, force: bool = False) -> None:
        """Releases one level this task holds (all of them with
        ``force``); the lock goes when no task holds it. ``RuntimeError``
        if this task holds none (and not force)."""
        st, me = self._state, _aio.current_task()
        levels = st.owners.get(me, 0)
        if not levels:
            if force:
                return
            raise RuntimeError(f"Cannot release a lock on {self._lock_file} (lock id: {id(self)}) that is not held")
        if levels > 1 and not force:
            st.owners[me] = levels - 1
            return
        del st.owners[me]
        if not st.owners:
            await self._let_go()

    async def _let_go(self) -> None:
        st = self._state
        held, st.held, st.mode = st.held, None, None
        try:
            if held is not None:
                await held._arelease()
        finally:
            st.changed()

    async def close(self) -> None:
        """Releases every level, of every task, and closes the object:
        acquisitions then raise ``RuntimeError``."""
        st = self._state
        if st.owners:
            st.owners.clear()
            await self._let_go()
        self._closed = True


# filelock's soft, strict and lease locks: hold's portable protocol.


class MarkerSoftFileLock(SoftFileLock):
    """filelock's MarkerSoftFileLock (a soft lock whose marker names its
    holder): hold's ``SoftFileLock``, whose file names its holder already."""


class StrictSoftFileLock(SoftFileLock):
    """filelock's StrictSoftFileLock, a soft lock that never lets two live
    holders in (fail-closed): hold's ``SoftFileLock`` is that already. Its
    portable protocol takes a holder's lock over only once the holder is
    known dead, never by age; filelock's claim directories are not made."""

    @property
    def claims(self) -> Tuple[StrictSoftFileClaim, ...]:
        """filelock's published claims of this lock: none under hold."""
        return ()


class _Lease:
    """What SoftFileLease and AsyncSoftFileLease add to their soft lock."""

    def __init__(self, lock_file: Union[str, "os.PathLike[str]"], *, lease_duration: float = 30.0,
                 heartbeat_interval: Optional[float] = None,
                 on_compromise: Optional[Callable[[LeaseCompromise], None]] = None, **options: Any) -> None:
        duration = _seconds("lease_duration", lease_duration)
        if not 0 < duration < float("inf"):
            raise ValueError(f"lease_duration must be positive and finite, got {lease_duration!r}")
        beat = duration / 3 if heartbeat_interval is None else _seconds("heartbeat_interval", heartbeat_interval)
        if not 0 < beat < duration:
            raise ValueError(f"heartbeat_interval must be positive and below lease_duration, got {heartbeat_interval!r}")
        if options.get("lifetime") is not None:
            raise ValueError("lifetime is not supported by SoftFileLease: lease_duration sets when a lease expires")
        super().__init__(lock_file, **options)
        self._lease_duration, self._heartbeat_interval, self._on_compromise = duration, beat, on_compromise
        self._claims: Dict[int, LeaseClaim] = {}

    @property
    def lease_duration(self) -> float:
        """Seconds after which filelock's peers may take a lease not refreshed."""
        return self._lease_duration

    @property
    def heartbeat_interval(self) -> float:
        """Seconds between filelock's refreshes (hold's agent keeps its own pace)."""
        return self._heartbeat_interval

    def _claim(self) -> LeaseClaim:
        return self._claims.setdefault(id(self._context), LeaseClaim())

    @property
    def token(self) -> Optional[str]:
        """The token of the current hold, None while released."""
        return self._claim().token if self.is_locked else None

    @property
    def compromise(self) -> Optional[LeaseCompromise]:
        """Why the current (or last) hold was lost, or None."""
        claim = self._claim()
        held = self._context.held
        if claim.compromise is None and held is not None and claim.token is not None:
            lost = getattr(held, "lost", None)
            if lost is not None:
                claim.compromise = LeaseCompromise(self.lock_file, claim.token, "marker-missing", lost)
                if self._on_compromise is not None:
                    self._on_compromise(claim.compromise)
        return claim.compromise

    def _acquired(self, held: Any) -> None:
        import secrets

        super()._acquired(held)
        claim = self._claim()
        claim.token, claim.compromise = secrets.token_hex(16), None


class SoftFileLease(_Lease, SoftFileLock):
    """filelock's SoftFileLease, a soft lock its holder keeps fresh and a
    peer may take once it has not been refreshed for ``lease_duration``:
    hold's ``SoftFileLock``, kept fresh by hold's agent while this process
    lives. Unlike filelock's, a live holder is never taken over: a lease
    is lost only if its holder dies (the agent with it) or its file is
    removed, when ``compromise`` says so and ``on_compromise`` is called.

    ``lease_duration`` and ``heartbeat_interval`` are checked as filelock
    checks them and reported; ``token`` is a random token per hold."""


class AsyncStrictSoftFileLock(AsyncSoftFileLock):
    """``StrictSoftFileLock`` for asyncio: hold's ``AsyncSoftFileLock``."""

    claims = StrictSoftFileLock.claims


class AsyncSoftFileLease(_Lease, AsyncSoftFileLock):
    """``SoftFileLease`` for asyncio: hold's ``AsyncSoftFileLock`` with the
    lease's options and properties (see ``SoftFileLease``)."""


class SoftReadWriteLock(ReadWriteLock):
    """filelock's SoftReadWriteLock, its reader-writer lock for shared
    filesystems: under hold, ``ReadWriteLock`` (shared and exclusive kernel
    locks of ``lock_file``, writers not starved). hold's portable protocol
    has exclusive locks only, so this one is as far-reaching as the
    filesystem's kernel locks (NFS passes flock on to the server; a share
    whose kernel locks do not reach every host needs ``SoftFileLock``).
    ``heartbeat_interval``, ``stale_threshold``, ``poll_interval`` and
    ``on_compromise`` are checked and kept: the kernel frees a dead
    holder's lock, so there is nothing to refresh or judge stale."""

    def __init__(self, lock_file: Union[str, "os.PathLike[str]"], timeout: float = -1, *, blocking: bool = True,
                 is_singleton: bool = True, heartbeat_interval: float = 30.0, stale_threshold: Optional[float] = None,
                 poll_interval: float = 0.25, on_compromise: Optional[Callable[[LeaseCompromise], None]] = None) -> None:
        beat = _seconds("heartbeat_interval", heartbeat_interval)
        stale = 3 * beat if stale_threshold is None else _seconds("stale_threshold", stale_threshold)
        poll = _seconds("poll_interval", poll_interval)
        if not 0 < beat < float("inf") or not beat < stale < float("inf") or not 0 < poll < float("inf"):
            raise ValueError(
                "heartbeat_interval, stale_threshold and poll_interval must be positive and finite, with "
                f"stale_threshold above heartbeat_interval; got {heartbeat_interval!r}, {stale_threshold!r}, "
                f"{poll_interval!r}"
            )
        super().__init__(lock_file, timeout, blocking=blocking, is_singleton=is_singleton)
        self.heartbeat_interval, self.stale_threshold, self.poll_interval = beat, stale, poll
        self.on_compromise = on_compromise


class AsyncSoftReadWriteLock(AsyncReadWriteLock):
    """``SoftReadWriteLock`` for asyncio: hold's ``AsyncReadWriteLock``
    (see ``SoftReadWriteLock`` for its options)."""

    def __init__(self, lock_file: Union[str, "os.PathLike[str]"], timeout: float = -1, *, blocking: bool = True,
                 is_singleton: bool = True, heartbeat_interval: float = 30.0, stale_threshold: Optional[float] = None,
                 poll_interval: float = 0.25, on_compromise: Optional[Callable[[LeaseCompromise], None]] = None,
                 loop: Optional[_aio.AbstractEventLoop] = None, executor: Any = None) -> None:
        beat = _seconds("heartbeat_interval", heartbeat_interval)
        stale = 3 * beat if stale_threshold is None else _seconds("stale_threshold", stale_threshold)
        poll = _seconds("poll_interval", poll_interval)
        if not 0 < beat < float("inf") or not beat < stale < float("inf") or not 0 < poll < float("inf"):
            raise ValueError(
                "heartbeat_interval, stale_threshold and poll_interval must be positive and finite, with "
                f"stale_threshold above heartbeat_interval; got {heartbeat_interval!r}, {stale_threshold!r}, "
                f"{poll_interval!r}"
            )
        super().__init__(lock_file, timeout, blocking=blocking, is_singleton=is_singleton, loop=loop,
                         executor=executor)
        self.heartbeat_interval, self.stale_threshold, self.poll_interval = beat, stale, poll
        self.on_compromise = on_compromise


class AsyncAcquireSoftReadWriteReturnProxy(AsyncAcquireReadWriteReturnProxy):
    """What ``AsyncSoftReadWriteLock``'s acquisitions return."""


def _seconds(name: str, value: Any) -> float:
    """A number of seconds, as filelock takes them (any real number or
    Decimal, not a bool)."""
    import decimal
    import numbers

    if isinstance(value, bool) or not isinstance(value, (numbers.Real, decimal.Decimal)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    if isinstance(value, decimal.Decimal) and value.is_snan():
        return float("nan")
    try:
        f = float(value)
    except OverflowError:
        raise ValueError(f"{name} is too large to be a number of seconds: {value!r}") from None
    # A negative duration too small for a float stays negative.
    return -5e-324 if f == 0 and value < 0 else f


#: Whether FileLock is a kernel lock here (filelock's: fcntl.flock is there).
has_fcntl: bool = _api._has_fcntl()

#: The version of filelock's API this module provides (hold's own version
#: is ``hold.__version__``): code that checks filelock's version to pick
#: features finds those of filelock 4.3.1.
__version__ = "4.3.1"


# After fork(): the child holds none of its parent's locks (the parent's
# agent holds them, for the parent), so its lock objects start released,
# as filelock's do, instead of waiting for the parent's hold; the
# descriptors lent to on_acquired are closed in the child.
_all_locks: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _forget_after_fork() -> None:
    for lock in list(_all_locks):
        with contextlib.suppress(Exception):
            lock._forget_parent()
    _task_holders.clear()
    for state in list(_async_rw_states.values()):
        with contextlib.suppress(Exception):
            state.__init__()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


#: filelock's names of its platform classes: under hold, the agent takes
#: the platform's kernel lock, so each is FileLock (AsyncFileLock).
UnixFileLock = WindowsFileLock = FileLock
AsyncUnixFileLock = AsyncWindowsFileLock = AsyncFileLock


def __getattr__(name: str) -> Any:
    # filelock.asyncio, the submodule, is imported on first use.
    if name == "asyncio":
        import importlib

        return importlib.import_module(__name__ + ".asyncio")
    if name == "StrictRelease":  # a concurrent.futures.Future: imported when named
        return _api.strict_release_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
