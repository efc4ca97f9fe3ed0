"""The exceptions of every failed operation, one class per agent error code,
and the warning of an update that succeeded."""

from __future__ import annotations

import errno as _errno
from typing import Any, Dict, List, Mapping, Optional, Type

__all__ = [
    "HoldError",
    "Busy",
    "Timeout",
    "Lost",
    "Aborted",
    "Foreign",
    "Invalid",
    "AgentError",
    "Deadlock",
    "NotFound",
    "PermissionDenied",
    "IsADirectory",
    "NotRegular",
    "NoSpace",
    "ReadOnly",
    "HoldWarning",
]


class HoldError(Exception):
    """The error of every failed operation.

    ``code`` says what happened, with the codes of the Node package:
    ``"EBUSY"``, ``"ETIMEDOUT"``, ``"ELOST"``, ``"EABORT"``, ``"EFOREIGN"``,
    ``"EINVAL"``, ``"EAGENT"`` (the agent died or could not start), and the
    file errors of update and append (``"ENOENT"``, ``"EACCES"``, ...).
    ``str(err)`` is the message hold prints. For contention errors
    ``holder`` describes who holds the lock (``pid``, ``host``,
    ``command``, ``age`` read it).
    """

    code: str = "EIO"

    def __init__(
        self,
        message: str,
        code: Optional[str] = None,
        holder: Optional[Mapping[str, Any]] = None,
        hint: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        #: Who holds the lock (as ``hold status`` shows it), for contention errors.
        self.holder: Optional[Dict[str, Any]] = dict(holder) if holder else None
        #: What to do about it, when hold knows.
        self.hint = hint
        if isinstance(self, OSError):
            # The file errors are OSErrors too, with the errno of their
            # code, as the builtin ones have.
            self.errno = getattr(_errno, self.code, None)
            self.strerror = message

    def __str__(self) -> str:
        # hold's message, also for the OSError subclasses (whose own
        # __str__ would prefix "[Errno N]").
        return self.message

    def __reduce__(self) -> Any:
        # Keeps the fields when the error crosses a process boundary
        # (multiprocessing pickles exceptions).
        return (_rebuild, (type(self), self.message, self.code, self.holder, self.hint))

    def _field(self, key: str) -> Any:
        return self.holder.get(key) if self.holder else None

    @property
    def pid(self) -> Optional[int]:
        """The holder's process id on its host (for hold's clients: its agent's)."""
        v = self._field("pid")
        return v if isinstance(v, int) else None

    @property
    def host(self) -> Optional[str]:
        """The holder's host name."""
        v = self._field("host")
        return v if isinstance(v, str) else None

    @property
    def command(self) -> Optional[List[str]]:
        """The holder's command line."""
        v = self._field("command")
        return list(v) if isinstance(v, list) else None

    @property
    def age(self) -> Optional[float]:
        """How long the holder has held the lock, in seconds, when known."""
        v = self._field("held_seconds")
        return float(v) if isinstance(v, (int, float)) else None


def _rebuild(
    cls: Type[HoldError], message: str, code: str, holder: Optional[Dict[str, Any]], hint: Optional[str]
) -> HoldError:
    return cls(message, code=code, holder=holder, hint=hint)


class Busy(HoldError):
    """The lock is held and the call said not to wait (``try_lock``, ``timeout=0``)."""

    code = "EBUSY"


class Timeout(HoldError, TimeoutError):
    """The wait given in ``timeout`` ran out. Also a builtin ``TimeoutError``."""

    code = "ETIMEDOUT"


class Lost(HoldError):
    """A held lock was lost (its lock file replaced, its portable lock
    broken, its lease expired), or its agent died."""

    code = "ELOST"


class Aborted(HoldError):
    """The wait was given up: cancelled, or the agent was closing."""

    code = "EABORT"


class Foreign(HoldError):
    """The lock path holds something hold did not create (a data file,
    another tool's lock file): name a separate lock file, or pass it as
    ``lock_file``."""

    code = "EFOREIGN"


class Invalid(HoldError, ValueError):
    """A bad target, name or option; the message says which. Also a ``ValueError``."""

    code = "EINVAL"


class AgentError(HoldError):
    """The hold agent could not start, or died while a request was pending."""

    code = "EAGENT"


class Deadlock(HoldError, RuntimeError):
    """The wait could never end: the lock is held by the caller itself (a
    lock this thread holds, on another Lock object), which cannot release it
    while it waits. Raised at once instead of hanging, naming the holder.
    Also a ``RuntimeError``, as filelock's deadlock error is."""

    code = "EDEADLK"


class NotFound(HoldError, FileNotFoundError):
    """A file or directory does not exist: the lock file's directory, or the
    file of ``update`` with ``must_exist``. Also a ``FileNotFoundError``."""

    code = "ENOENT"


class PermissionDenied(HoldError, PermissionError):
    """Permission denied (or an update refused for what the replacement
    could not keep: see ``hint``). Also a ``PermissionError``."""

    code = "EACCES"


class IsADirectory(HoldError, IsADirectoryError):
    """``update`` or ``append`` was given a directory. Also an ``IsADirectoryError``."""

    code = "EISDIR"


class NotRegular(HoldError, OSError):
    """Something other than a regular file sits at the lock path. Also an ``OSError``."""

    code = "ENOTREG"


class NoSpace(HoldError, OSError):
    """The disk is full. Also an ``OSError`` (errno ENOSPC)."""

    code = "ENOSPC"


class ReadOnly(HoldError, OSError):
    """The filesystem is read-only. Also an ``OSError`` (errno EROFS)."""

    code = "EROFS"


class HoldWarning(UserWarning):
    """What an update that succeeded should tell, issued with
    ``warnings.warn``: the file changed owner (``allow_owner_change``), or
    its directory could not be synced, so the change may not survive a
    crash of the machine. Not an error: the file was replaced, and a caller
    that retried would apply its change twice."""


_CLASSES: Dict[str, Type[HoldError]] = {
    c.code: c
    for c in (
        Busy, Timeout, Lost, Aborted, Foreign, Invalid, AgentError, Deadlock,
        NotFound, PermissionDenied, IsADirectory, NotRegular, NoSpace, ReadOnly,
    )
}


def from_reply(error: Optional[Mapping[str, Any]]) -> HoldError:
    """Turns the ``error`` object of an agent reply into its exception."""
    if not isinstance(error, Mapping):
        return HoldError("the hold agent failed without saying why", code="EIO")
    code = str(error.get("code") or "EIO")
    message = str(error.get("message") or code)
    holder = error.get("holder")
    hint = error.get("hint")
    cls = _CLASSES.get(code, HoldError)
    return cls(
        message,
        code=code,
        holder=holder if isinstance(holder, Mapping) else None,
        hint=hint if isinstance(hint, str) else None,
    )
