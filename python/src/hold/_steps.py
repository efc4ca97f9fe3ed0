"""One core for the two faces of every operation.

Each operation that talks to the agent, or waits, is written once, as a
generator: it yields what it needs done (a request whose reply it awaits,
a pause) and gets the outcome sent back, or its error thrown in. ``run``
performs those steps blocking the calling thread (the API for threads);
``arun`` awaits them, never blocking the event loop (the API for
asyncio). So the rules of an operation (what it sends, what it undoes
when it fails, what it retries) have one home, and the faces differ only
in how they wait, as filelock derives its async locks from one core.
"""

from __future__ import annotations

import types
from typing import Any, Awaitable, Callable, Generator, Iterator, Optional, TypeVar

T = TypeVar("T")

#: An operation: a generator of steps, returning the operation's result.
Steps = Generator[Any, Any, T]


def _drive(steps: "Steps[T]", perform: Callable[[Any], Iterator[Any]], step: Any) -> Generator[Any, Any, T]:
    """Performs step, the first that steps yielded, and every step after
    it, as perform delegates them (through the event loop, for arun),
    feeding steps each outcome; run is the same loop for a blocking
    perform."""
    while True:
        error: Optional[BaseException] = None
        try:
            outcome = yield from perform(step)
        except BaseException as e:  # the operation decides what to do with it
            outcome, error = None, e
        try:
            step = steps.send(outcome) if error is None else steps.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def run(steps: "Steps[T]", perform: Callable[[Any], Any]) -> T:
    """Drives steps to their end, performing each with perform, which
    blocks until its outcome; returns the operation's result. An operation
    that needs no step (a lock free at once) costs one send. This is
    _drive's loop with perform called in place, which spares each
    operation of a thread two generators (most operations are one or
    two steps, a lock and a release)."""
    try:
        step = steps.send(None)
        while True:
            try:
                outcome = perform(step)
            except BaseException as e:  # the operation decides what to do with it
                step = steps.throw(e)
            else:
                step = steps.send(outcome)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


#: _drive as an awaitable (a generator-based coroutine), for arun.
_adrive = types.coroutine(_drive)


async def arun(steps: "Steps[T]", perform: Callable[[Any], Awaitable[Any]]) -> T:
    """run(), awaiting each step's outcome."""
    try:
        step = steps.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    return await _adrive(steps, lambda s: perform(s).__await__(), step)  # type: ignore[no-any-return]
