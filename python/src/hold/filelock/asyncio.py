"""filelock's ``filelock.asyncio`` submodule, on hold: its async lock
classes (the same objects ``hold.filelock`` has) and the names of its
async machinery, with what each means under hold."""

from __future__ import annotations

import threading
from typing import Any

from . import (
    AsyncAcquireReturnProxy,
    AsyncFileLock,
    AsyncSoftFileLease,
    AsyncSoftFileLock,
    AsyncStrictSoftFileLock,
    AsyncUnixFileLock,
    AsyncWindowsFileLock,
    BaseAsyncFileLock,
    FileLockContext,
    _Meta,
)

__all__ = [
    "AsyncAcquireReturnProxy",
    "AsyncFileLockContext",
    "AsyncFileLockMeta",
    "AsyncSoftFileLease",
    "AsyncSoftFileLock",
    "AsyncStrictSoftFileLock",
    "AsyncThreadLocalFileContext",
    "AsyncTransitionGate",
    "AsyncTransitionUnavailableError",
    "AsyncUnixFileLock",
    "AsyncWindowsFileLock",
    "BaseAsyncFileLock",
]

#: The metaclass of the async lock classes (``is_singleton``): hold's is
#: the one of every lock class.
AsyncFileLockMeta = _Meta


class AsyncFileLockContext(FileLockContext):
    """An async lock's state, with filelock's ``run_in_executor``,
    ``executor`` and ``loop`` (kept as given: hold's waits need no
    executor)."""

    def __init__(self, *args: Any, run_in_executor: bool = True, executor: Any = None, loop: Any = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.run_in_executor, self.executor, self.loop = run_in_executor, executor, loop


class AsyncThreadLocalFileContext(AsyncFileLockContext, threading.local):
    """An ``AsyncFileLockContext`` of each thread's own."""


class AsyncTransitionUnavailableError(Exception):
    """A task waiting its turn at ``AsyncTransitionGate`` could not have it."""


class AsyncTransitionGate:
    """Lets one task at a time through, first come first served (filelock
    queues its async locks' acquisitions and releases this way). hold's
    agent orders the waits itself; this is the plain gate, for code that
    uses it: ``async with gate:``."""

    def __init__(self) -> None:
        import asyncio

        self._lock = asyncio.Lock()  # asyncio.Lock wakes its waiters in order

    async def __aenter__(self) -> "AsyncTransitionGate":
        await self._lock.acquire()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._lock.release()


def __dir__() -> "list[str]":
    # As filelock's: the public names only.
    return sorted(__all__)
