"""One ``hold agent`` child per process, and the two channels to it.

Python's standard library takes kernel locks (fcntl.flock), but nothing
else hold's locks are made of: owner records, fencing tokens, fair queues,
the portable protocol, named locks, etcd. So this package does what the
Node package does: it starts one ``hold agent`` per process, on first use,
and asks it for locks in the JSON-lines protocol of the repository's
docs/agent.md. The agent holds the locks; when this process exits or dies,
the agent's standard input ends and it releases everything at once.

Lock requests (lock, try, release, check) go over the agent's synchronous
channel where the system has FIFOs: this thread writes the request to one
FIFO and reads the reply from the other, a few µs, without the reader
thread in between. They are marked "queue": the agent answers at once what
it can (a free lock, a busy try, a release) and queues the rest (a wait, a
network lock), whose reply comes on its standard output. Which is which is
the agent's decision alone (docs/agent.md): this module carries requests
and holds no lock rules. Everything else goes to the agent's standard
input, and a daemon thread routes the replies on its standard output to
whoever waits for them (a thread, or an asyncio future).
"""

from __future__ import annotations

import atexit
import base64
import collections
import contextlib
import itertools
import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time
import warnings
from time import perf_counter
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Tuple

from ._errors import AgentError, HoldError, HoldWarning, Lost, from_reply

#: The agent protocol version this package speaks: 4, for releases
#: written ahead of their replies (hello's "pipeline"; see
#: Agent.release_later). An agent of version 2 or 3 serves it too: its lock
#: replies say no release may be written ahead, so each is waited for.
PROTOCOL_VERSION = 4
MIN_PROTOCOL_VERSION = 2

_EXE = "hold.exe" if os.name == "nt" else "hold"



def _json_object(raw):
    """The JSON object raw holds, or None when it holds anything else."""
    try:
        reply = json.loads(raw)
    except ValueError:
        return None
    return reply if isinstance(reply, dict) else None

def find_binary() -> str:
    """Where the hold executable is: $HOLD_BIN, else the one shipped in this
    package (platform wheels carry it in hold/_bin), else hold on PATH."""
    env = os.environ.get("HOLD_BIN")
    if env:
        if not os.path.exists(env):
            raise AgentError(f"HOLD_BIN is {env!r}, which does not exist")
        return env
    shipped = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_bin", _EXE)
    if os.path.isfile(shipped):
        return shipped
    found = shutil.which("hold")
    if found:
        return found
    raise AgentError(
        "cannot find the hold executable: HOLD_BIN is not set, this installation of the "
        "package carries no hold of its own (it is the pure py3-none-any wheel or a source "
        "install), and there is no hold on PATH: set HOLD_BIN to a hold executable, or build "
        "one from a clone of hold with `go install ./cmd/...` in the clone and put Go's bin "
        "directory on PATH (export PATH=\"$PATH:$(go env GOPATH)/bin\"); once the packages are "
        "published, the platform wheel for this system carries its own"
    )


def describe_client() -> str:
    """Describes this process for holder messages: "app.py, python pid 4200"."""
    script = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return f"{script or 'python'}, python pid {os.getpid()}"


def encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def decode(data: Any) -> bytes:
    return base64.b64decode(data) if isinstance(data, str) and data else b""


Reply = Dict[str, Any]

#: The synchronous channel's reply to a successful release or check of
#: request id N: _SYNC_OK % N.
_SYNC_OK = b'{"id":%d,"ok":true}\n'

#: The synchronous channel's reply to request id N that the agent queued:
#: _QUEUED % N.
_QUEUED = b'{"id":%d,"ok":true,"queued":true}\n'

#: How the reply of a lock taken on the synchronous channel starts
#: (_LOCK_REPLY % N), and where its owner record does. The agent writes
#: the record last (the fields follow the order of its reply struct, and a
#: lock's reply has none after it), and inside the JSON strings before it
#: a quote is always escaped, so the first OWNER_KEY is the record's.
_LOCK_REPLY = b'{"id":%d,"ok":true,"lock":'
_OWNER_KEY = b',"owner":'

#: The key under which _lock_reply keeps the owner record undecoded.
OWNER_RAW = "owner_raw"


#: The lazy lock replies decoded lately, but for their id and lock number,
#: by what follows the lock number: the same for every lock of one path.
_lazy_tails: Dict[bytes, Reply] = {}


def _lazy_reply(raw: bytes, rid: int, start: int) -> Optional[Reply]:
    """Decodes the reply raw of a lock taken lazily (no owner record),
    whose lock number starts at start: what follows the number is decoded
    once per path (_lazy_tails)."""
    end = raw.find(b",", start)
    if end < 0:
        end = raw.find(b"}", start)
    tail = raw[end:]
    known = _lazy_tails.get(tail)
    if known is not None and raw[start:end].isdigit():
        reply = dict(known)
        reply["id"], reply["lock"] = rid, int(raw[start:end])
        return reply
    reply = _json_object(raw)
    if reply is None:
        return None
    if raw[start:end].isdigit() and reply.get("id") == rid and reply.get("lock") == int(raw[start:end]) and len(tail) <= 1024:
        if len(_lazy_tails) >= 64:
            _lazy_tails.clear()
        _lazy_tails[tail] = {k: v for k, v in reply.items() if k not in ("id", "lock")}
    return reply


def _lock_reply(raw: bytes, rid: int, start: int) -> Optional[Reply]:
    """Decodes a lock's reply but for its owner record, which it keeps as
    bytes under OWNER_RAW for Lock.owner to decode if it is ever read; None
    if the line is not shaped so. start is where the lock number starts."""
    i = raw.find(_OWNER_KEY)
    if i < 0:
        return _lazy_reply(raw, rid, start)
    if not raw.endswith(b"}}\n"):
        return None
    try:
        reply = json.loads(raw[:i] + b"}")
    except ValueError:
        return None
    if not isinstance(reply, dict):
        return None
    reply[OWNER_RAW] = raw[i + len(_OWNER_KEY) : -2]
    return reply


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Request:
    """A request sent on the standard channel, until its reply arrives.

    ``kind`` says how to undo a success that comes after its requester gave
    up (interrupted, cancelled): "acquire" releases the lock, "update"
    aborts the update; other kinds need nothing.
    """

    __slots__ = ("id", "kind", "callback", "reply", "error", "done", "abandoned")

    def __init__(self, kind: str, callback: Callable[["Request"], None]) -> None:
        self.id = 0
        self.kind = kind
        self.callback = callback
        self.reply: Optional[Reply] = None
        self.error: Optional[HoldError] = None
        self.done = False
        self.abandoned = False

    def result(self) -> Reply:
        """The reply, or its error raised."""
        if self.error is not None:
            raise self.error
        assert self.reply is not None
        if not self.reply.get("ok"):
            raise from_reply(self.reply.get("error"))
        return self.reply


class SyncChannel:
    """This side of the agent's synchronous channel: two FIFO descriptors,
    both opened without blocking (the agent may die at any moment, and an
    open of a dead agent's FIFO would never end). The replies are then
    read blocking, one system call a reply: a blocking read of a dead
    agent's FIFO ends (end of file), as its only writer is gone."""

    def __init__(self, requests: int, replies: int) -> None:
        self.requests = requests
        self.replies = replies
        os.set_blocking(replies, True)
        # How long to poll for a reply before sleeping in a read, in
        # seconds: the agent tells it in the channel's first reply.
        self.spin = 0.0
        self.rest = b""  # what a read gave after the line it was for
        # Never made on Windows, which has no FIFOs and no poll(): the
        # flags are looked up, so that type checks for Windows pass.
        self.poll_in = select.poll()
        self.poll_in.register(replies, getattr(select, "POLLIN"))
        self.poll_out = select.poll()
        self.poll_out.register(requests, getattr(select, "POLLOUT"))

    def close(self) -> None:
        for fd in (self.requests, self.replies):
            try:
                os.close(fd)
            except OSError:
                pass

    def write(self, data: bytes) -> None:
        try:
            n = os.write(self.requests, data)
        except BlockingIOError:
            n = 0
        if n == len(data):
            return  # the common case: a line is far shorter than the FIFO holds
        view = memoryview(data)[n:]
        while view:
            try:
                n = os.write(self.requests, view)
            except BlockingIOError:
                self.poll_out.poll()  # full: the agent is reading
                continue
            view = view[n:]

    def read_line(self, spin: float, timeout: Optional[float] = None) -> bytes:
        """Reads one reply line; raises EOFError if the agent is gone, and
        TimeoutError if timeout (seconds) passes without one. Replies of
        releases written ahead may come in one read with the next: what
        follows the line is kept for the next call."""
        buf = self.rest
        nl = buf.find(b"\n")
        if nl >= 0:
            self.rest = buf[nl + 1 :]
            return buf[: nl + 1]
        parts: List[bytes] = [buf] if buf else []
        self.rest = b""
        while True:
            if spin or timeout is not None:
                self._wait_readable(spin, timeout)
                spin = 0.0
            chunk = os.read(self.replies, 65536)
            if not chunk:
                raise EOFError("end of file")
            nl = chunk.find(b"\n")
            if nl < 0:
                parts.append(chunk)
                continue
            if nl + 1 < len(chunk):
                self.rest = chunk[nl + 1 :]
                chunk = chunk[: nl + 1]
            if not parts:
                return chunk
            parts.append(chunk)
            return b"".join(parts)

    def _wait_readable(self, spin: float, timeout: Optional[float]) -> None:
        """Polls the replies for up to spin seconds, then, with a timeout,
        waits for them that long at most (TimeoutError after it)."""
        deadline = perf_counter() + spin
        while spin and perf_counter() < deadline:
            if self.poll_in.poll(0):
                return
        if timeout is not None and not self.poll_in.poll(timeout * 1000):
            raise TimeoutError("the hold agent did not answer")


#: How many releases may be written ahead of their replies (see
#: Agent.release_later): far fewer than the replies FIFO holds, so that
#: the agent never blocks writing one.
_UNREAD_MAX = 64


class Agent:
    """One ``hold agent`` child, and the requests and locks it serves."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.bin = find_binary()
        self.mu = threading.Lock()  # pending, early, dead, locks, writes to stdin
        self.sync_mu = threading.Lock()  # one request at a time on the synchronous channel
        self.pending: Dict[int, Request] = {}
        # Replies of the standard channel that came before anyone waited
        # for them: a queued request's (see adopt), by id.
        self.early: Dict[int, Reply] = {}
        self.locks: Dict[int, Any] = {}  # lock number -> Lock
        # Releases written on the synchronous channel whose replies are
        # not read yet, in order: (request id, Lock). See release_later.
        self.unread: Deque[Tuple[int, Any]] = collections.deque()
        # The errors of releases whose replies said they failed, to be
        # raised by the next call (see failures).
        self.failed: List[HoldError] = []
        # Request ids, for both channels: a request the synchronous channel
        # queues gets its reply on the standard one under its id.
        self.ids = itertools.count(1)
        self.dead: Optional[HoldError] = None
        self.sync: Optional[SyncChannel] = None
        kwargs: Dict[str, Any] = {}
        if os.name == "nt":
            kwargs["creationflags"] = getattr(subprocess, "CREATE_NO_WINDOW", 0)
        try:
            # argv[0] "hold": what ps and holder messages show.
            self.proc = subprocess.Popen(
                ["hold", "agent", "--for", describe_client()],
                executable=self.bin,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                bufsize=0,
                close_fds=True,
                **kwargs,
            )
        except OSError as e:
            raise AgentError(
                f"cannot start the hold agent ({self.bin}): {e}; install the platform wheel of "
                "this package, put hold on PATH, or set HOLD_BIN"
            ) from e
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin = self.proc.stdin
        self.stdout = self.proc.stdout
        self.reader = threading.Thread(target=self._read, name="hold-agent-reader", daemon=True)
        self.reader.start()
        want_sync = os.name != "nt" and os.environ.get("HOLD_AGENT_SYNC") != "0"
        try:
            hello = self.call({"op": "hello", "version": PROTOCOL_VERSION, "sync": want_sync, "pipeline": want_sync})
        except AgentError:
            raise
        except HoldError as e:
            self.kill(AgentError(f"the hold agent ({self.bin}) refused the hello: {e}"))
            raise AgentError(f"the hold agent ({self.bin}) refused the hello: {e}") from e
        except BaseException:
            # Interrupted while starting: no agent is left behind.
            self.kill(AgentError(f"the hold agent ({self.bin}) was not started: interrupted"))
            raise
        if hello.get("version") not in range(MIN_PROTOCOL_VERSION, PROTOCOL_VERSION + 1):
            err = AgentError(
                f"{self.bin} speaks agent protocol {hello.get('version')}, this package "
                f"{MIN_PROTOCOL_VERSION} to {PROTOCOL_VERSION}: install matching versions"
            )
            self.kill(err)
            raise err
        self.version = str(hello.get("agent", ""))
        #: The protocol version both sides speak: the lower of the two.
        self.protocol = int(hello["version"])
        paths = hello.get("sync")
        if want_sync and isinstance(paths, dict):
            self._open_sync(paths)
        # Lazy acquisitions (protocol 3) where the synchronous channel is
        # open: a lock's token and owner record are then asked for on it,
        # in µs, when first read (Lock.token), and a lock nobody asks
        # about costs the agent no record to write and none to erase.
        self.lazy = self.sync is not None and self.protocol >= 3

    def _open_sync(self, paths: Dict[str, Any]) -> None:
        """Opens this side of the synchronous channel. Neither open blocks:
        the agent holds both FIFOs open for reading and writing. Opened
        without blocking, the requests FIFO fails at once (ENXIO) when the
        agent has died since its reply. Without it, every request keeps
        to the standard channel."""
        fds: List[int] = []
        try:
            fds.append(os.open(str(paths["requests"]), os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC))
            fds.append(os.open(str(paths["replies"]), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
        except (OSError, KeyError):
            for fd in fds:
                os.close(fd)
            return
        self.sync = SyncChannel(fds[0], fds[1])

    # The standard channel.

    def _read(self) -> None:
        """The reader thread: routes replies to their requests and events to
        their locks, until the agent's output ends."""
        fd = self.stdout.fileno()
        buf = b""
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                buf += chunk
                while True:
                    nl = buf.find(b"\n")
                    if nl < 0:
                        break
                    line, buf = buf[:nl], buf[nl + 1 :]
                    try:
                        msg = json.loads(line)
                    except ValueError:
                        continue  # not ours: the protocol writes only JSON lines
                    if isinstance(msg, dict):
                        self._dispatch(msg)
        except (OSError, ValueError):
            pass  # the descriptor was closed: this process is leaving
        code = self.proc.wait()
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        self.die(AgentError(f"the hold agent (pid {self.proc.pid}) {how}"))

    def _dispatch(self, msg: Reply) -> None:
        if "event" in msg:
            if msg.get("event") == "lost":
                with self.mu:
                    lock = self.locks.get(msg.get("lock"))  # type: ignore[arg-type]
                if lock is not None:
                    err = msg.get("error")
                    lock._lose(from_reply(err) if err else Lost(f"lock {lock.path} lost"))
            return
        rid = msg.get("id")
        with self.mu:
            req = self.pending.pop(rid, None)  # type: ignore[arg-type]
            if req is None and type(rid) is int:
                # A queued request's reply, before its caller waits for it.
                if len(self.early) >= 1024:
                    self.early.clear()
                self.early[rid] = msg
        if req is not None:
            self._settle(req, msg, None)

    def _settle(self, req: Request, reply: Optional[Reply], error: Optional[HoldError]) -> None:
        with self.mu:
            req.reply, req.error, req.done = reply, error, True
            abandoned = req.abandoned
        if abandoned:
            self._undo(req)
        else:
            req.callback(req)

    def _undo(self, req: Request) -> None:
        """Undoes the success of a request whose requester gave up."""
        r = req.reply
        if req.error is not None or r is None or not r.get("ok"):
            return
        if req.kind == "acquire" and "lock" in r:
            self.send_quietly({"op": "release", "lock": r["lock"]})
        elif req.kind == "update" and "update" in r:
            self.send_quietly({"op": "abort", "update": r["update"]})

    def send(self, msg: Dict[str, Any], req: Request) -> Request:
        """Sends msg with a fresh id on the standard channel; req gets its reply."""
        with self.mu:
            if self.dead is not None:
                raise self.dead
            req.id = next(self.ids)
            self.pending[req.id] = req
            line = json.dumps({"id": req.id, **msg}, separators=(",", ":")).encode() + b"\n"
            try:
                _write_all(self.stdin.fileno(), line)
            except (OSError, ValueError) as e:
                del self.pending[req.id]
                raise AgentError(f"the hold agent (pid {self.proc.pid}) stopped reading: {e}") from e
        return req

    def send_quietly(self, msg: Dict[str, Any]) -> None:
        """Sends msg and forgets it: its reply is not awaited."""
        try:
            self.send(msg, Request("", lambda r: None))
        except HoldError:
            pass

    def adopt(self, req: Request) -> None:
        """Waits, as req, for the reply to request req.id, which the
        synchronous channel queued: it comes on the standard channel, and
        may have come already."""
        with self.mu:
            if self.dead is not None:
                raise self.dead
            early = self.early.pop(req.id, None)
            if early is None:
                self.pending[req.id] = req
        if early is not None:
            self._settle(req, early, None)

    def call(self, msg: Dict[str, Any], kind: str = "", queued: int = 0) -> Reply:
        """Sends msg on the standard channel and blocks this thread until its
        reply; or, with queued, waits so for the reply to that request,
        which the synchronous channel queued (msg is then not sent). If the
        wait is interrupted (KeyboardInterrupt), it is cancelled, and a
        success that comes anyway undone."""
        done = threading.Lock()
        done.acquire()
        req = Request(kind, lambda r: done.release())
        # An interrupt can come while send() writes, after the request
        # went out: it is abandoned then too (req.id is set by then).
        with self.abandoning(req):
            self.submit(msg, req, queued)
            done.acquire()
        return req.result()

    def submit(self, msg: Dict[str, Any], req: Request, queued: int = 0) -> None:
        """Sends msg on the standard channel for req, after the replies of
        the releases written ahead (barrier); or, with queued, makes req
        wait for the reply to that request, which the synchronous channel
        queued (msg is then not sent)."""
        if queued:
            req.id = queued
            self.adopt(req)
        else:
            self.barrier()
            self.send(msg, req)

    @contextlib.contextmanager
    def abandoning(self, req: Request) -> Iterator[None]:
        """Abandons req (see abandon) if the block ends with an exception:
        an interrupt, a cancelled task."""
        try:
            yield
        except BaseException:
            if req.id:
                self.abandon(req)
            raise

    def abandon(self, req: Request) -> None:
        """Gives up on req: cancels its wait, and undoes its success if it
        has one already or gets one later."""
        with self.mu:
            late = req.done
            req.abandoned = True
        if late:
            self._undo(req)
        elif req.kind in ("acquire", "update", "append"):
            self.send_quietly({"op": "cancel", "request": req.id})

    # The synchronous channel.

    def sync_call(self, msg: Dict[str, Any], body: Optional[bytes] = None) -> Optional[Reply]:
        """Sends msg on the synchronous channel, marked "queue", and blocks
        until its reply, a few µs. body, if given, is msg encoded already,
        without its id: the line's rest after '{"id":N,'. Returns the reply:
        one with "queued" says that the agent queued the request, whose
        reply is to come on the standard channel under the reply's id (see
        call and adopt). Returns None if there is no such channel (or it
        just broke: the agent is then dead, with the error the caller will
        meet). The replies of releases written before it are read first
        (release_later); a failure among them is for the caller to raise
        (failures)."""
        with self.sync_mu:
            ch = self.sync
            if ch is None:
                return None
            # The commonest lines and replies need no JSON encoder or parser.
            rid = next(self.ids)
            if body is not None:
                line = b'{"id":%d,' % rid + body
            else:
                line = json.dumps({"id": rid, **msg, "queue": True}, separators=(",", ":")).encode() + b"\n"
            try:
                ch.write(line)
            except OSError as e:
                self._sync_broke(e)
                return None
            try:
                self._read_unread(ch, ch.spin)
                raw = ch.read_line(ch.spin)
            except (OSError, EOFError) as e:
                self._sync_broke(e)
                return None
            except BaseException:
                # Interrupted between request and reply: read the reply,
                # due in µs, so that the channel stays in step, and give
                # back a lock taken meanwhile.
                self._sync_drain(ch)
                raise
        return self._sync_reply(ch, rid, raw)

    def _sync_reply(self, ch: SyncChannel, rid: int, raw: bytes) -> Optional[Reply]:
        """Decodes the synchronous channel's reply raw to request rid."""
        if raw == _SYNC_OK % rid:
            return {"id": rid, "ok": True}
        prefix = _LOCK_REPLY % rid
        if raw.startswith(prefix):
            reply = _lock_reply(raw, rid, len(prefix))
            if reply is not None:
                return reply
        elif raw == _QUEUED % rid:
            return {"id": rid, "ok": True, "queued": True}
        reply = _json_object(raw)
        if reply is None:
            return None
        if "spin_us" in reply:
            ch.spin = float(reply["spin_us"]) / 1e6
        return reply

    def release_later(self, lock: Any) -> bool:
        """Writes the release of lock on the synchronous channel without
        waiting for its reply, which the next call on the channel reads
        (sync_call), or the next call on the standard channel (barrier),
        or close: a failed release is kept (failures) and raised there,
        never dropped. The release is in the agent's input when this
        returns, so it comes before anything this process asks next.
        Returns False where there is no synchronous channel."""
        with self.sync_mu:
            ch = self.sync
            if ch is None:
                return False
            rid = next(self.ids)
            try:
                # "sent": when this process let go, on the clock the agent
                # reads too (CLOCK_MONOTONIC), so that a loss the agent hears
                # of after it is not reported as this release's failure.
                ch.write(
                    b'{"id":%d,"op":"release","lock":%d,"queue":true,"sent":%d}\n'
                    % (rid, lock._number, time.monotonic_ns())
                )
            except OSError as e:
                self._sync_broke(e)
                return False
            self.unread.append((rid, lock))
            if len(self.unread) >= _UNREAD_MAX:
                try:
                    self._read_unread(ch, 0)
                except (OSError, EOFError) as e:
                    self._sync_broke(e)
        return True

    def _read_unread(self, ch: SyncChannel, spin: float, timeout: Optional[float] = None) -> None:
        """Reads the replies of the releases written ahead (sync_mu held),
        keeping the error of each that failed."""
        while self.unread:
            rid, lock = self.unread[0]
            raw = ch.read_line(spin, timeout)
            self.unread.popleft()
            if raw == _SYNC_OK % rid:
                continue
            reply = self._sync_reply(ch, rid, raw)
            if reply is None or reply.get("id") != rid:
                raise OSError(f"the reply {raw[:80]!r} does not answer the release {rid}")
            if reply.get("queued"):
                # Served on the standard channel (a network lock): its
                # reply comes there, and is kept in the same way.
                req = Request("", lambda r, lock=lock: self._released(lock, r.reply, r.error))
                req.id = rid
                self.adopt(req)
            else:
                self._released(lock, reply, None)

    def _released(self, lock: Any, reply: Optional[Reply], error: Optional[HoldError]) -> None:
        """Keeps the failure of a release written ahead, for failures()."""
        if error is None and reply is not None and reply.get("ok"):
            return
        err = error or from_reply(reply.get("error") if reply else None)
        if not isinstance(err, Lost):
            err = Lost(f"lock {lock.path} was not released cleanly: {err}", holder=err.holder, hint=err.hint)
        lock._lost = err
        with self.mu:
            self.failed.append(err)

    def barrier(self) -> None:
        """Reads the replies of the releases written ahead, before a
        request on the standard channel, so that the agent has served them
        first; then raises a failure among them (failures)."""
        if self.unread:
            with self.sync_mu:
                ch = self.sync
                if ch is not None:
                    try:
                        self._read_unread(ch, 0)
                    except (OSError, EOFError) as e:
                        self._sync_broke(e)
        self.raise_failed()

    def failures(self) -> List[HoldError]:
        """Takes the errors of the releases written ahead that failed."""
        with self.mu:
            failed, self.failed = self.failed, []
        return failed

    def raise_failed(self) -> None:
        """Raises the first failure of a release written ahead, if any
        (the others are raised by the calls after)."""
        if self.failed:
            with self.mu:
                err = self.failed.pop(0) if self.failed else None
            if err is not None:
                raise err

    def _sync_drain(self, ch: SyncChannel) -> None:
        try:
            self._read_unread(ch, 0)
            reply = json.loads(ch.read_line(0))
            if reply.get("queued"):
                # Its wait goes on: end it, and undo a success.
                req = Request("acquire", lambda r: None)
                req.id = reply["id"]
                self.adopt(req)
                self.abandon(req)
            elif reply.get("ok") and "lock" in reply:
                ch.write(b'{"id":0,"op":"release","lock":%d}\n' % reply["lock"])
                ch.read_line(0)
        except BaseException:
            self.sync = None
            ch.close()

    def _sync_broke(self, e: BaseException) -> None:
        ch, self.sync = self.sync, None
        if ch is not None:
            ch.close()
        self.kill(AgentError(f"the hold agent (pid {self.proc.pid}) stopped answering: {e}"))

    # The end.

    def die(self, err: HoldError) -> None:
        """Marks the agent dead: fails every pending request and loses every
        held lock. The next call starts a new agent."""
        with self.mu:
            if self.dead is not None:
                return
            self.dead = err
            pending = list(self.pending.values())
            self.pending.clear()
            locks = list(self.locks.values())
            self.locks.clear()
        _forget(self)
        for req in pending:
            self._settle(req, None, err)
        for lock in locks:
            lock._lose(Lost(f"lock {lock.path} lost: {err}"))

    def kill(self, err: HoldError) -> None:
        self.die(err)
        try:
            self.proc.kill()
        except OSError:
            pass

    def close(self) -> None:
        """Ends the agent the way the protocol asks: its standard input
        ends, and it releases every lock and exits. Waits only for the
        replies of releases written ahead (a few µs, a second at most),
        and warns (HoldWarning) of each that failed: nothing is left to
        raise it."""
        with self.sync_mu:
            ch, self.sync = self.sync, None
            if ch is not None:
                try:
                    self._read_unread(ch, 0, timeout=1.0)
                except (OSError, EOFError):
                    pass
        for err in self.failures():
            warnings.warn(f"{err} (the release's reply came as this process closed its agent)", HoldWarning)
        if ch is not None:
            ch.close()
        try:
            self.stdin.close()
        except OSError:
            pass

    def forget_in_child(self) -> None:
        """In a child made by fork(): lets go of the parent's agent without
        using it. Its pipes and FIFOs are closed here (so that the agent still
        sees its input end when the parent exits, whatever this child does),
        nothing is written to them, and the parent's locks stay the
        parent's."""
        self.dead = AgentError("the hold agent belongs to the parent process")
        for f in (self.stdin, self.stdout):
            try:
                f.close()
            except (OSError, ValueError):
                pass
        if self.sync is not None:
            self.sync.close()
            self.sync = None
        self.pending.clear()
        self.locks.clear()
        self.unread.clear()  # the parent's releases: the parent reads their replies
        self.failed = []
        # Not this process's child: nothing here may wait for it.
        self.proc.returncode = 0


_agent: Optional[Agent] = None
_agent_mu = threading.Lock()

#: This process's pid. os.getpid() is a system call, which every lock and
#: release would make to tell whether this process is the agent's client
#: or a child made by fork() since; the pid changes only in such a child,
#: where the at-fork hook below (which os.fork, multiprocessing and
#: subprocess's preexec_fn run) sets it again. A child made by a C
#: extension's own fork() that skips the hooks, which Python does not
#: support either, must not use hold.
pid = os.getpid()


def get_agent() -> Agent:
    """This process's agent, started on first use (and again after it died,
    or in a child made by fork())."""
    global _agent
    ag = _agent
    if ag is not None and ag.dead is None and ag.pid == pid:
        return ag
    with _agent_mu:
        ag = _agent
        if ag is not None and ag.pid != os.getpid():
            # The hook did not run for this child (see pid).
            ag.forget_in_child()
            ag = _agent = None
        if ag is None or ag.dead is not None:
            ag = _agent = Agent()
        return ag


def _forget(ag: Agent) -> None:
    global _agent
    if _agent is ag:
        _agent = None


def _after_fork_in_child() -> None:
    global _agent, _agent_mu, pid
    pid = os.getpid()
    # The parent's threads, the reader among them, did not come along; a
    # lock one of them held would never be released here.
    _agent_mu = threading.Lock()
    ag, _agent = _agent, None
    if ag is not None:
        ag.forget_in_child()


def _close_at_exit() -> None:
    ag = _agent
    if ag is not None and ag.pid == os.getpid():  # once: the exact answer
        ag.close()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
atexit.register(_close_at_exit)
