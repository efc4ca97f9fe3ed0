"""The value types, errors and type names of filelock's public API, for
``hold.filelock`` (see its doc for what each means under hold).

They carry no locking of their own: the lock classes are in the package's
``__init__``. Kept apart so that importing them costs nothing.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any, Callable, List, NamedTuple, Optional

try:  # Python 3.8+: typing has Literal and TypedDict
    from typing import Literal, TypedDict
except ImportError:  # pragma: no cover
    from typing_extensions import Literal, TypedDict  # type: ignore[assignment]

#: ``context_error_policy``'s values: a release error at the end of a
#: ``with`` block is raised with the block's error as its context
#: (``"chain"``) or both together in an exception group (``"group"``).
ContextErrorPolicy = Literal["chain", "group"]

#: ``close_error_policy``'s values: what an error closing the descriptor
#: lent to ``on_acquired`` does (``"default"``, ``"raise"``, ``"suppress"``).
CloseErrorPolicy = Literal["default", "raise", "suppress"]

#: Why a lease stopped being its holder's (``LeaseCompromise.reason``).
CompromiseReason = Literal["marker-missing", "owner-changed", "refresh-failed", "evicted"]

#: What kind of holder an owner record declares.
OwnerMode = Literal["lease", "exclusive", "unknown"]

#: A strict lock's claim is announced (``"intent"``) or holds (``"held"``).
StrictSoftFileClaimState = Literal["intent", "held"]


class LockOptions(TypedDict, total=False):
    """The keyword options a subclass may pass on to ``BaseFileLock``
    (each as ``BaseFileLock`` documents it)."""

    timeout: float
    mode: int
    thread_local: bool
    blocking: bool
    is_singleton: bool
    poll_interval: float
    lifetime: Optional[float]
    context_error_policy: ContextErrorPolicy
    close_error_policy: CloseErrorPolicy
    fallback_to_soft: bool
    preserve_lock_file: bool
    on_acquired: Optional[Callable[[int], None]]


class AcquireWait(NamedTuple):
    """One acquisition's settings once the call's arguments are merged
    with the lock's: whether to wait, the cancel callback, the timeout
    (negative: none), the interval between attempts and when the wait
    began (``time.perf_counter()``)."""

    blocking: bool
    cancel_check: Optional[Callable[[], bool]]
    timeout: float
    poll_interval: float
    start_time: float


@dataclasses.dataclass(eq=False)
class InFlight:
    """An acquisition under way, which an interrupt (a signal handler that
    releases) may have to undo. hold's acquisitions are one request to the
    agent, which undoes a cancelled one itself: kept for the API."""

    frame: Any
    levels_before: Optional[int] = None
    voided: bool = False
    rolled_back: bool = False


class OwnerRecord(NamedTuple):
    """What a soft lock's marker says of its holder: pid, host name, the
    kind of holder (``OwnerMode``), a lease's token and duration, and the
    process's start token when one was written."""

    pid: int
    hostname: str
    mode: OwnerMode
    token: Optional[str] = None
    lease_duration: Optional[float] = None
    start: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class LeaseCompromise:
    """Why a held lease stopped being this process's: the lock's path, the
    token of the hold that was lost, the reason (``CompromiseReason``) and
    the error that ended it, if any."""

    lock_file: str
    token: str
    reason: CompromiseReason
    error: Optional[BaseException] = None


@dataclasses.dataclass
class LeaseHeartbeat:
    """What keeps a lease fresh: its thread and the event that stops it.
    Under hold the agent keeps its locks fresh; a lease's heartbeat here
    is a thread that watches the agent's hold (see ``SoftFileLease``)."""

    thread: threading.Thread
    stop: threading.Event


@dataclasses.dataclass
class LeaseClaim:
    """A lease's state in one lock context: the token of the current hold
    (None while released), why it was lost (None while it holds) and the
    heartbeat that watches it."""

    token: Optional[str] = None
    compromise: Optional[LeaseCompromise] = None
    heartbeat: Optional[LeaseHeartbeat] = None


@dataclasses.dataclass(frozen=True)
class StrictSoftFileClaim:
    """One claim of filelock's strict soft lock, as read from its claim
    directory: its file name, state, token, the claimant's pid and host,
    and its process start token. hold's ``StrictSoftFileLock`` makes no
    such claims (it is hold's portable protocol): kept for the API."""

    name: str
    state: StrictSoftFileClaimState
    token: str
    pid: int
    hostname: str
    start: Optional[int] = None


class ReleasePendingError(TimeoutError):
    """A strict lock's release had not ended by the caller's deadline;
    ``wait()`` waits for it and raises what it raised. hold waits for its
    releases, so it never raises this: kept for the API."""

    def __init__(self, message: str, wait: Callable[[Optional[float]], None]) -> None:
        super().__init__(message)
        self._wait = wait

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self._wait), self.__dict__)

    def wait(self, timeout: Optional[float] = None) -> None:
        """Waits for the release (``timeout`` seconds at most)."""
        self._wait(timeout)


class LeaseSettingsMismatch(ValueError):
    """A contender for a lease disagrees with its holder on how long the
    lease lasts (``lease_duration``)."""


class SoftFileLockProtocolError(OSError):
    """A soft lock's state on disk cannot be read without risking two
    holders at once: the lock's path, the claim concerned (or None) and
    why."""

    def __init__(self, lock_file: str, claim_name: Optional[str], reason: str) -> None:
        self._lock_file, self._claim_name, self._reason = lock_file, claim_name, reason
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = self._lock_file if self._claim_name is None else f"{self._lock_file}: claim {self._claim_name!r}"
        return f"Invalid strict soft-lock state at {where}: {self._reason}"

    def __reduce__(self) -> Any:
        return (type(self), (self._lock_file, self._claim_name, self._reason), self.__dict__)

    @property
    def lock_file(self) -> str:
        """The lock's path."""
        return self._lock_file

    @property
    def claim_name(self) -> Optional[str]:
        """The claim the state belongs to, or None for the whole lock."""
        return self._claim_name

    @property
    def reason(self) -> str:
        """Why the state cannot be read safely."""
        return self._reason


class SoftFileLockLifetimeWarning(FutureWarning):
    """A soft lock's ``lifetime`` would let a live holder be taken over
    once it expires. hold never breaks a live holder's lock by age, so it
    warns with this that ``lifetime`` is ignored (a ``FutureWarning``,
    shown wherever the lock is made)."""


def lock_descriptor(fd: int, *, blocking: bool = True, poll_interval: float = 0.05) -> bool:
    """Takes the kernel lock that ``FileLock`` takes (flock, exclusive) on
    a descriptor the caller opened and keeps: True once held; with
    ``blocking=False``, False when another holds it. It is taken in this
    process (not through hold's agent), so it excludes hold's and
    filelock's ``FileLock`` of the same file and is freed when the
    descriptor's last copy is closed."""
    import fcntl  # not on Windows, where this raises ImportError's OSError below

    if not isinstance(blocking, bool):
        raise TypeError(f"blocking must be a bool, not {type(blocking).__name__}")
    if blocking:
        import decimal
        import numbers

        if isinstance(poll_interval, bool) or not isinstance(poll_interval, (numbers.Real, decimal.Decimal)):
            raise TypeError(f"poll_interval must be a number of seconds, not {type(poll_interval).__name__}")
        if not 0 < float(poll_interval) <= threading.TIMEOUT_MAX:
            raise ValueError(
                f"poll_interval must be greater than 0 and at most threading.TIMEOUT_MAX ({threading.TIMEOUT_MAX}), "
                f"got {poll_interval!r}"
            )
        # The kernel queues the wait: no polling is needed.
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def unlock_descriptor(fd: int) -> None:
    """Releases a lock taken by ``lock_descriptor``; the descriptor stays
    open."""
    import fcntl

    fcntl.flock(fd, fcntl.LOCK_UN)


def _has_fcntl() -> bool:
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return False
    return os.name != "nt"


__all__: List[str] = []


class _LifetimeIgnored(SoftFileLockLifetimeWarning, UserWarning):
    """hold's warning that ``lifetime`` is ignored: filelock warns a
    native lock's ignored lifetime as a ``UserWarning`` and a soft lock's
    as a ``SoftFileLockLifetimeWarning``; under hold both are ignored, so
    this is both, and either filter catches it."""


_strict_release: Any = None


def strict_release_class() -> Any:
    """``StrictRelease``, made on first use: it is a
    ``concurrent.futures.Future``, whose import is not free."""
    global _strict_release
    if _strict_release is None:
        import concurrent.futures

        class StrictRelease(concurrent.futures.Future):  # type: ignore[type-arg]
            """The release of a strict lock, which on Windows may end after the
            caller's deadline. hold's release of a portable lock is waited for,
            so the futures hold hands out are already done."""

            __module__ = "hold.filelock"

            def __init__(self) -> None:
                super().__init__()
                self.guard = threading.Lock()
                self.worker: Optional[threading.Thread] = None

        _strict_release = StrictRelease
    return _strict_release
