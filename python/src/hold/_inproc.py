"""Kernel locks taken in this process, with a recipe the agent computed.

A lock taken through the agent costs two wake-ups and two interpreters'
work, where the lock itself is an open, a flock(2) and a stat. So when the
agent takes a lock that nothing but the kernel decides (an exclusive lock
on a lock file the library judged hold's), its reply may carry a recipe
(internal/flock/inproc.go in the repository): the lock file's path, how to
open it, and the identity and stamp the file must still have. The next
acquisition of the same request follows it here: open, flock without
waiting, fstat and stat compared to the recipe. Anything else (the lock
busy, the file changed, an error) lets go and asks the agent, exactly as
before, which waits, judges and decides, and may hand out a fresh recipe.

Everything that is a rule stays with the agent: a hold taken here writes
no owner record until its token or owner is read, or it has lasted the
delay the recipe gives (a daemon thread looks every tick the recipe gives),
and then the agent writes it on the holder's behalf (inproc_record) and
erases it before the release (inproc_erase); its loss is the agent's
answer (inproc_check); a wait of this thread for a lock it holds here is
the agent's to call a deadlock (the request's held_inproc).

A child made by fork() closes the descriptors of these holds at once (the
at-fork hook): the lock stays the parent's, and the child cannot keep it
after the parent lets go. The descriptors are opened O_CLOEXEC, so no
program this process runs inherits them either.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

#: Set HOLD_INPROC=0 to take every lock through the agent.
enabled = os.environ.get("HOLD_INPROC") != "0"


class Recipe:
    """A recipe of the agent's (the "recipe" of a lock's reply), and the
    lock path the reply named."""

    __slots__ = ("path", "flags", "dev", "ino", "ctime_ns", "size", "delay", "tick", "ticket", "lock_path")

    def __init__(self, r: Dict[str, Any], lock_path: str) -> None:
        self.path = str(r["path"])
        self.flags = int(r["flags"])
        self.dev = int(r["dev"])
        self.ino = int(r["ino"])
        self.ctime_ns = int(r["ctime_ns"])
        self.size = int(r["size"])
        self.delay = int(r["record_delay_ns"]) / 1e9
        self.tick = max(int(r["lazy_tick_ns"]) / 1e9, 0.001)
        self.ticket = str(r["ticket"])
        self.lock_path = lock_path

    def file(self) -> Dict[str, Any]:
        """The hold's lock file, as the agent's requests name it."""
        return {"path": self.path, "dev": self.dev, "ino": self.ino}


class Held:
    """One hold taken here: its descriptor, recipe and thread, when it
    began, and the record the agent wrote for it, if any."""

    __slots__ = ("fd", "recipe", "thread", "started", "since", "record", "token")

    def __init__(self, fd: int, recipe: Recipe, thread: Optional[int]) -> None:
        self.fd = fd
        self.recipe = recipe
        self.thread = thread
        self.started = time.time_ns()
        self.since = time.monotonic()
        self.record: Optional[str] = None  # base64, as the agent gave it
        self.token = 0


#: The recipes by request (see key), at most _MAX_RECIPES.
recipes: Dict[Tuple[Any, ...], Recipe] = {}
_MAX_RECIPES = 256

#: The holds taken here, by descriptor, with their Lock objects. mu also
#: keeps fork() out between an open and the hold's entry here, and between
#: its removal and the close (see the at-fork hooks below).
holds: Dict[int, Any] = {}
mu = threading.Lock()
_recorder: Optional[threading.Thread] = None


def key(op: str, req: Dict[str, Any]) -> Optional[Tuple[Any, ...]]:
    """The recipe key of a request; None for one whose fields or settings
    (mappings) make it no key."""
    if "fields" in req or "settings" in req:
        return None
    return (op, *req.items())


def learn(k: Optional[Tuple[Any, ...]], reply: Dict[str, Any]) -> None:
    """Keeps the recipe of a lock's reply, if it has one, for request k."""
    r = reply.get("recipe")
    if k is None or not isinstance(r, dict):
        return
    try:
        recipe = Recipe(r, str(reply.get("path", "")))
    except (KeyError, TypeError, ValueError):
        return
    if len(recipes) >= _MAX_RECIPES:
        recipes.clear()
    recipes[k] = recipe


def take(recipe: Recipe, thread: Optional[int]) -> Optional[Held]:
    """Follows the recipe: the hold, or None when the agent must be asked."""
    import fcntl  # only ever given a recipe where it exists

    with mu:
        try:
            fd = os.open(recipe.path, recipe.flags)
        except OSError:
            return None
        h = Held(fd, recipe, thread)
        holds[fd] = None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        st = os.fstat(fd)
        ps = os.lstat(recipe.path)
    except OSError:
        _close(fd)
        return None
    if not (
        stat.S_ISREG(st.st_mode) and st.st_nlink == 1 and st.st_dev == recipe.dev and st.st_ino == recipe.ino
        and st.st_ctime_ns == recipe.ctime_ns and st.st_size == recipe.size
        and ps.st_dev == recipe.dev and ps.st_ino == recipe.ino
    ):
        _close(fd)
        return None
    return h


def _close(fd: int) -> None:
    with mu:
        holds.pop(fd, None)
        try:
            os.close(fd)
        except OSError:
            pass


def listed(h: Held, lock: Any) -> None:
    """Lists h, held by lock, for the recorder and the at-fork hook."""
    global _recorder
    with mu:
        holds[h.fd] = lock
        if _recorder is None:
            _recorder = threading.Thread(target=_record_late, args=(h.recipe.tick,), name="hold-inproc-records", daemon=True)
            _recorder.start()


def gone(h: Held) -> Optional[str]:
    """Why h's descriptor no longer holds its lock, or None while it may.

    The lock is the open file description's: once the program closes the
    descriptor (an os.close of it, a double close of another that had
    the same number), the kernel lets the lock go, and every other
    process may take it. That is seen here, with no agent to ask: the
    descriptor is not open (EBADF), or it is open on another file, the
    number having been reused. (One case stays unseen: the same lock
    file opened again by the program at the same number, which is
    another description that holds nothing.)"""
    try:
        st = os.fstat(h.fd)
    except OSError as e:
        if e.errno == errno.EBADF:
            return (f"its descriptor {h.fd} was closed by the program (os.close, or a double close elsewhere), "
                    "which let the kernel lock go: other processes may hold it now")
        return None  # cannot tell: not a loss
    if st.st_dev != h.recipe.dev or st.st_ino != h.recipe.ino:
        return (f"its descriptor {h.fd} was closed by the program (os.close, or a double close elsewhere), "
                "which let the kernel lock go, and the number now refers to another file: other processes may hold the lock now")
    return None


def let_go(h: Held) -> None:
    """Unlocks and closes h (its record erased before, by the caller).
    A descriptor that is gone (see gone) is not ours to unlock or close
    any more: its number may be the program's file now. It is forgotten."""
    import fcntl

    if gone(h) is not None:
        with mu:
            holds.pop(h.fd, None)
        return
    try:
        fcntl.flock(h.fd, fcntl.LOCK_UN)
    except OSError:
        pass
    _close(h.fd)


def thread_files(thread: int) -> Optional[List[Dict[str, Any]]]:
    """The lock files this thread holds here, for a request's held_inproc."""
    if not holds:
        return None
    with mu:
        # A hold whose descriptor the program closed holds nothing: the
        # thread may take that lock again without a deadlock.
        files = [lk._held.recipe.file() for lk in holds.values() if lk is not None and lk._held is not None
                 and lk._held.thread == thread and not lk._released and gone(lk._held) is None]
    return files or None


def _record_late(tick: float) -> None:
    """The recorder: every tick while holds are listed, has the agent
    write the records of those that have lasted their recipe's delay."""
    global _recorder
    while True:
        time.sleep(tick)
        now = time.monotonic()
        with mu:
            if not holds:
                _recorder = None
                return
            due = [lk for lk in holds.values() if lk is not None and lk._held is not None and lk._token is None
                   and now - lk._held.since >= lk._held.recipe.delay]
        for lk in due:
            try:
                lk._fetch_record()
            except Exception:  # the holder's own calls report what failed
                pass


def _before_fork() -> None:
    mu.acquire()


def _after_fork_in_parent() -> None:
    mu.release()


def _after_fork_in_child() -> None:
    """The child closes the parent's holds' descriptors (never unlocking:
    the lock is the parent's), and forgets them."""
    global mu, _recorder
    for fd, lk in list(holds.items()):
        if lk is not None and lk._held is not None and gone(lk._held) is not None:
            continue  # the number is the program's now, not a hold's
        try:
            os.close(fd)
        except OSError:
            pass
    holds.clear()
    recipes.clear()
    _recorder = None
    mu = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)
