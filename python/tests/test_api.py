"""The API on one process: locks, errors and what they say, update, append,
status, and bad input."""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from helpers import HANG, TempDirTest, hold, hold_binary


class LockTest(TempDirTest):
    def test_lock_fields_and_release(self) -> None:
        t = self.path("data")
        with hold.lock(t, timeout=5) as l:
            self.assertEqual(l.path, t + ".lock")
            self.assertEqual(l.protocol, "flock")
            self.assertGreater(l.token, 0)
            self.assertEqual(l.owner["fence"], l.token)
            self.assertEqual(hold.status(t)["state"], "held exclusive")
            l.check()
        self.assertEqual(hold.status(t)["state"], "free")
        with self.assertRaises(hold.Lost):
            l.check()
        l.release()  # idempotent
        with hold.lock(t) as l2:
            self.assertGreater(l2.token, l.token)

    def test_a_short_hold_writes_nothing(self) -> None:
        # A lock whose token and owner nobody reads is taken lazily where
        # the synchronous channel is open: the agent writes no record into
        # the lock file, so its release has none to erase either.
        # A hold that lasts 10 ms gets its record unasked, which a loaded
        # machine can make of a short one: of 20 holds, one must stay empty.
        lazy = hold._agent.get_agent().lazy
        sizes = []
        for i in range(20):
            t = self.path(f"quick{i}")
            l = hold.lock(t)
            self.assertIn("token=unread" if lazy else "token=", repr(l))
            l.release()
            sizes.append(os.path.getsize(t + ".lock"))
            if lazy:
                self.assertEqual((l.token, l.owner), (0, {}))  # released unread: none was handed out
            else:
                self.assertGreater(l.token, 0)  # every request on the agent's pipes: the reply carries it
            if sizes[-1] == 0:
                break
        if lazy:
            self.assertIn(0, sizes, "every short hold nobody asked about wrote its record")
        else:
            self.assertNotIn(0, sizes)
        t = self.path("quick")
        # Read while held, the token comes with its record, and the next
        # exclusive holder's is larger.
        with hold.lock(t) as a:
            first = a.token
            self.assertGreater(first, 0)
            self.assertEqual(a.owner["fence"], first)
            self.assertEqual(hold.status(t)["holder"]["pid"], a.owner["pid"])
        self.assertEqual(a.token, first)  # kept after the release
        with hold.lock(t) as b:
            self.assertGreater(b.token, first)

    @unittest.skipIf(sys.platform == "win32", "flock(1) is a unix tool")
    def test_dot_lock_target_is_locked_itself_too(self) -> None:
        # A target ending in .lock is locked through its companion
        # x.lock.lock and itself, as flock(1) and filelock take it:
        # flock(1), another process, finds it busy; nothing is written
        # into it.
        t = self.path("x.lock")
        with hold.lock(t) as l:
            self.assertEqual(l.path, t + ".lock")
            r = subprocess.run(["flock", "-n", t, "true"])
            self.assertEqual(r.returncode, 1, "flock -n x.lock while lock('x.lock') holds it")
            self.assertEqual(hold.status(t)["state"], "held exclusive")
        # The release is in the agent's input; a call of hold's confirms it
        # before flock(1), which asks the kernel, not the agent, looks.
        self.assertEqual(hold.status(t)["state"], "free")
        self.assertEqual(subprocess.run(["flock", "-n", t, "true"]).returncode, 0)
        with open(t, "rb") as f:
            self.assertEqual(f.read(), b"", "hold wrote into x.lock")

    @unittest.skipIf(not sys.platform.startswith("linux"), "the kernel names a lock's holders on Linux")
    def test_busy_names_a_flock_holder(self) -> None:
        # flock(1) writes no owner record: the kernel's holder is named.
        t = self.path("f.lock")
        p = subprocess.Popen(["flock", t, "sleep", "60"])
        try:
            e = None
            deadline = time.monotonic() + HANG
            while e is None and time.monotonic() < deadline:
                try:
                    hold.try_lock(t).release()
                    time.sleep(0.05)  # flock(1) has not locked it yet
                except hold.Busy as busy:
                    e = busy
            self.assertIsNotNone(e, "flock(1) never held the lock")
            assert e is not None
            self.assertEqual(e.pid, p.pid)
            self.assertEqual(e.command, ["flock", t, "sleep", "60"])
        finally:
            p.kill()
            p.wait()

    def test_busy_names_the_holder(self) -> None:
        t = self.path("data")
        with hold.lock(t) as l:
            with self.assertRaises(hold.Busy) as cm:
                hold.try_lock(t)
            e = cm.exception
            self.assertEqual(e.code, "EBUSY")
            self.assertIn("lock is busy: held by pid", str(e))
            self.assertEqual(e.pid, l.owner["pid"])
            self.assertEqual(e.host, l.owner["host"])
            assert e.command is not None
            self.assertEqual(e.command[:2], ["hold", "agent"])
            self.assertIn(f"python pid {os.getpid()}", " ".join(e.command))
            assert e.holder is not None
            self.assertIs(e.holder["alive"], True)
            # timeout=0 is a try too.
            with self.assertRaises(hold.Busy):
                hold.lock(t, timeout=0)

    def test_timeout_is_a_timeout_error(self) -> None:
        t = self.path("data")
        # Held by another thread (one this thread held would be a Deadlock).
        held, done = threading.Event(), threading.Event()

        def holder() -> None:
            with hold.lock(t):
                held.set()
                done.wait(HANG)

        th = threading.Thread(target=holder)
        th.start()
        held.wait(HANG)
        try:
            with self.assertRaises(TimeoutError) as cm:
                hold.lock(t, timeout=0.2)
        finally:
            done.set()
            th.join(HANG)
        e = cm.exception
        self.assertIsInstance(e, hold.Timeout)
        assert isinstance(e, hold.Timeout)
        self.assertEqual(e.code, "ETIMEDOUT")
        self.assertIn("timed out", str(e))
        self.assertIsNotNone(e.pid)
        assert e.age is not None
        self.assertGreaterEqual(e.age, 0.0)

    def test_error_survives_pickling(self) -> None:
        t = self.path("data")
        with hold.lock(t):
            with self.assertRaises(hold.Busy) as cm:
                hold.try_lock(t)
        e = pickle.loads(pickle.dumps(cm.exception))
        self.assertIsInstance(e, hold.Busy)
        self.assertEqual((e.code, str(e), e.pid), ("EBUSY", str(cm.exception), cm.exception.pid))

    def test_shared(self) -> None:
        t = self.path("data")
        with hold.lock(t, shared=True), hold.lock(t, shared=True):
            self.assertEqual(hold.status(t)["state"], "held shared")
            with self.assertRaises(hold.Busy):
                hold.try_lock(t)

    def test_fair_portable_named_lock_file(self) -> None:
        t = self.path("data")
        with hold.lock(t, fair=True, timeout=5) as l:
            self.assertEqual(l.path, t + ".lock")
        with hold.lock(t, protocol="dir") as l:
            self.assertEqual(l.protocol, "dir")
            with self.assertRaises(hold.Busy):
                hold.try_lock(t, protocol="dir")
        lf = self.path("exact")
        with hold.lock(lock_file=lf) as l:
            self.assertEqual(l.path, lf)
        name = f"py-test-{os.getpid()}"
        with hold.lock(name=name) as l:
            with self.assertRaises(hold.Busy):
                hold.try_lock(name=name)
            self.assertEqual(hold.status(name=name)["held"], True)

    def test_fields_in_owner_record(self) -> None:
        t = self.path("data")
        with hold.lock(t, fields={"job": "nightly"}) as l:
            self.assertEqual(l.owner["fields"], {"job": "nightly"})
            self.assertEqual(hold.status(t)["holder"]["fields"], {"job": "nightly"})

    def test_with_block_releases_on_error(self) -> None:
        t = self.path("data")
        with self.assertRaises(KeyError):
            with hold.lock(t):
                raise KeyError("x")
        hold.try_lock(t).release()

    def test_lost_when_lock_file_removed(self) -> None:
        t = self.path("data")
        l = hold.lock(t)
        os.remove(t + ".lock")
        with self.assertRaises(hold.Lost) as cm:
            l.check()
        self.assertEqual(cm.exception.code, "ELOST")
        self.assertIs(l.lost, cm.exception)
        with self.assertRaises(hold.Lost):
            l.release()

    def test_foreign(self) -> None:
        t = self.path("Cargo")
        with open(t + ".lock", "w") as f:
            f.write("# a data file, not a lock\n" * 10)
        with self.assertRaises(hold.Foreign) as cm:
            hold.lock(t)
        self.assertEqual(cm.exception.code, "EFOREIGN")


class FileTest(TempDirTest):
    def test_update(self) -> None:
        f = self.path("hooks.json")
        self.assertTrue(hold.update(f, lambda old: old + "a\n"))
        self.assertTrue(hold.update(f, lambda old: old + "b\n"))
        self.assertFalse(hold.update(f, lambda old: old))
        with open(f) as fh:
            self.assertEqual(fh.read(), "a\nb\n")
        self.assertTrue(hold.update(f, lambda old: old.replace(b"a", b"A"), binary=True))
        with open(f, "rb") as fb:
            self.assertEqual(fb.read(), b"A\nb\n")

    def test_update_writes_nothing_when_fn_raises(self) -> None:
        f = self.path("cfg")
        with open(f, "w") as fh:
            fh.write("old")

        def boom(old: str) -> str:
            raise RuntimeError("no")

        with self.assertRaises(RuntimeError):
            hold.update(f, boom)
        with open(f) as fh:
            self.assertEqual(fh.read(), "old")
        # The lock was released: another update goes through at once.
        self.assertTrue(hold.update(f, lambda old: "new", timeout=0))

    def test_update_must_exist(self) -> None:
        with self.assertRaises(hold.HoldError) as cm:
            hold.update(self.path("missing"), lambda old: "x", must_exist=True)
        self.assertEqual(cm.exception.code, "ENOENT")

    def test_update_empty_needs_allow_empty(self) -> None:
        f = self.path("f")
        with open(f, "w") as fh:
            fh.write("keep\n")
        for call in (
            lambda: hold.update(f, lambda old: ""),
            lambda: asyncio.run(hold.aupdate(f, lambda old: b"", binary=True)),
        ):
            with self.assertRaises(hold.HoldError) as cm:
                call()
            self.assertEqual(cm.exception.code, "EIO")
            self.assertIn("empty", str(cm.exception))
            self.assertIn("allow_empty", cm.exception.hint or "")
            with open(f) as fh:
                self.assertEqual(fh.read(), "keep\n")
        self.assertTrue(hold.update(f, lambda old: "", allow_empty=True))
        self.assertEqual(os.path.getsize(f), 0)
        with open(f, "w") as fh:
            fh.write("again\n")
        self.assertTrue(asyncio.run(hold.aupdate(f, lambda old: "", allow_empty=True)))
        self.assertEqual(os.path.getsize(f), 0)

    def test_update_hard_link_needs_allow_split(self) -> None:
        a, b = self.path("a"), self.path("b")
        with open(a, "w") as fh:
            fh.write("old\n")
        os.link(a, b)
        called = []
        with self.assertRaises(hold.HoldError) as cm:
            hold.update(a, lambda old: called.append(old) or "new\n")
        self.assertEqual(cm.exception.code, "EACCES")
        self.assertIn("2 hard links", str(cm.exception))
        self.assertIn("allow_split", cm.exception.hint or "")
        self.assertEqual(called, [], "fn ran for a refused update")
        for name in (a, b):
            with open(name) as fh:
                self.assertEqual(fh.read(), "old\n")
        self.assertTrue(hold.update(a, lambda old: old.replace("old", "new"), allow_split=True))
        with open(a) as fh:
            self.assertEqual(fh.read(), "new\n")
        with open(b) as fh:
            self.assertEqual(fh.read(), "old\n")

    @unittest.skipUnless(
        sys.platform.startswith("linux") and os.geteuid() == 0 and shutil.which("setpriv"),
        "needs root on Linux and setpriv (util-linux): files of another user, and the agent run as nobody",
    )
    def test_update_owner_change_warns(self) -> None:
        # Root may always give a file its owner, so the agent of this test
        # runs as nobody, through setpriv, in a worker process: a process
        # has one agent, started with the HOLD_BIN of its first request.
        nobody, other = 65534, 4242
        os.chmod(self.dir, 0o777)
        bin_dir = tempfile.mkdtemp(prefix="hold-py-test-bin-")
        self.addCleanup(shutil.rmtree, bin_dir, ignore_errors=True)
        os.chmod(bin_dir, 0o755)
        exe = os.path.join(bin_dir, "hold")
        shutil.copy(hold_binary(), exe)
        os.chmod(exe, 0o755)
        wrapper = os.path.join(bin_dir, "hold-as-nobody")
        with open(wrapper, "w") as fh:
            fh.write(
                f"#!/bin/sh\ncd '{self.dir}' && exec setpriv --reuid={nobody} --regid={nobody} --clear-groups '{exe}' \"$@\"\n"
            )
        os.chmod(wrapper, 0o755)
        f = self.path("tracker")
        with open(f, "w") as fh:
            fh.write("v1\n")
        os.chmod(f, 0o666)
        os.chown(f, other, other)
        out = self.finish(self.python(
            """
            import json, os, sys, warnings
            os.environ["HOLD_BIN"] = sys.argv[1]
            import hold
            try:
                hold.update("tracker", lambda old: "v2\\n")
                refused = None
            except hold.HoldError as e:
                refused = {"code": e.code, "message": str(e), "hint": e.hint}
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                written = hold.update("tracker", lambda old: old.replace("v1", "v2"), allow_owner_change=True)
            print(json.dumps({
                "refused": refused,
                "written": written,
                "warnings": [[w.category.__name__, str(w.message), os.path.basename(w.filename)] for w in caught],
            }))
            """,
            wrapper,
        ))
        got = json.loads(out)
        refused = got["refused"]
        self.assertIsNotNone(refused, "the update of another user's file was not refused")
        self.assertEqual(refused["code"], "EACCES")
        self.assertIn("uid 4242", refused["message"])
        self.assertIn("allow_owner_change", refused["hint"])
        self.assertTrue(got["written"])
        self.assertEqual(len(got["warnings"]), 1, got["warnings"])
        category, message, filename = got["warnings"][0]
        self.assertEqual(category, "HoldWarning")
        self.assertIn("tracker now belongs to uid 65534", message)
        self.assertEqual(filename, "<string>", "the warning does not point at the caller")
        with open(f) as fh:
            self.assertEqual(fh.read(), "v2\n")
        self.assertEqual(os.stat(f).st_uid, nobody)

    def test_append(self) -> None:
        f = self.path("log")
        hold.append(f, "one\n")
        hold.append(f, b"two\n")
        with open(f) as fh:
            self.assertEqual(fh.read(), "one\ntwo\n")


class BadInputTest(TempDirTest):
    def test_python_side_checks(self) -> None:
        cases = [
            (lambda: hold.lock(42), "target must be a path"),  # type: ignore[arg-type]
            (lambda: hold.lock(self.path("x"), timeout="5"), "timeout must be a number"),  # type: ignore[arg-type]
            (lambda: hold.lock(self.path("x"), timeout=float("nan")), "not NaN"),
            (lambda: hold.lock(self.path("x"), shared="yes"), "shared must be True or False"),  # type: ignore[arg-type]
            (lambda: hold.update(self.path("x"), lambda old: old, allow_split=1), "allow_split must be True or False"),  # type: ignore[arg-type]
            (lambda: hold.update(self.path("x"), lambda old: old, allow_owner_change="y"), "allow_owner_change must be True or False"),  # type: ignore[arg-type]
            (lambda: hold.update(self.path("x"), lambda old: old, allow_empty=0), "allow_empty must be True or False"),  # type: ignore[arg-type]
            (lambda: hold.lock(self.path("x"), fields=["a"]), "fields must be a mapping"),  # type: ignore[arg-type]
            (lambda: hold.lock(self.path("x"), name=""), "name must be a non-empty string"),
            (lambda: hold.lock(self.path("x"), deadlock_after=-1), "deadlock_after must be a number of seconds >= 0"),
            (lambda: hold.lock(self.path("x"), deadlock_after="1"), "deadlock_after must be a number of seconds >= 0"),  # type: ignore[arg-type]
            (lambda: hold.append(self.path("x"), 5), "data must be str or bytes"),  # type: ignore[arg-type]
            (lambda: hold.update(self.path("x"), "new"), "needs a function"),  # type: ignore[arg-type]
            (lambda: hold.update(self.path("x"), lambda old: None), "returned NoneType"),  # type: ignore[arg-type,return-value]
        ]
        for call, want in cases:
            with self.assertRaises(hold.Invalid) as cm:
                call()
            self.assertEqual(cm.exception.code, "EINVAL")
            self.assertIsInstance(cm.exception, ValueError)
            self.assertIn(want, str(cm.exception))

    def test_agent_side_checks(self) -> None:
        with self.assertRaises(hold.Invalid) as cm:
            hold.lock(self.path("x"), protocol="bogus")
        self.assertIn('unknown protocol "bogus"', str(cm.exception))
        with self.assertRaises(hold.Invalid):
            hold.lock()  # nothing to lock
        with self.assertRaises(hold.Invalid):
            hold.update(self.path("x"), lambda old: old, lock_file=self.path("x"))
        with self.assertRaises(TypeError):
            hold.lock(self.path("x"), wait=5)  # type: ignore[call-arg]


class BinaryTest(TempDirTest):
    def test_without_hold_bin_or_path(self) -> None:
        """With no HOLD_BIN and nothing on PATH, a platform wheel runs its
        own hold; anything else names the three places it looked."""
        env = {k: v for k, v in os.environ.items() if k != "HOLD_BIN"}
        env["PATH"] = self.dir
        code = (
            "import hold, hold._agent as a\n"
            "try:\n"
            "    hold.try_lock('t').release()\n"
            "except hold.AgentError as e:\n"
            "    print('error:', e)\n"
            "else:\n"
            "    print('bin:', a.get_agent().bin)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], cwd=self.dir, env=env, capture_output=True, text=True, timeout=HANG
        )
        self.assertEqual(out.returncode, 0, out.stderr)
        shipped = os.path.join(os.path.dirname(hold.__file__), "_bin")
        if os.path.isdir(shipped):
            self.assertIn("bin: " + shipped, out.stdout)
        else:
            for want in ("HOLD_BIN is not set", "platform wheel", "no hold on PATH",
                         "go install ./cmd/...", "go env GOPATH"):
                self.assertIn(want, out.stdout)
            # Nothing is published: the hint names no module version to fetch.
            self.assertNotIn("@latest", out.stdout)

    def test_hold_bin_missing(self) -> None:
        env = dict(os.environ, HOLD_BIN=self.path("nope"))
        code = "import hold\ntry:\n    hold.try_lock('t')\nexcept hold.AgentError as e:\n    print(e.code, e)\n"
        out = subprocess.run([sys.executable, "-c", code], cwd=self.dir, env=env, capture_output=True, text=True, timeout=HANG)
        self.assertIn("EAGENT HOLD_BIN is", out.stdout, out.stderr)


class ReadmeTest(unittest.TestCase):
    """python/README.md says what the code does: its signatures name every
    parameter of lock() and try_lock(), every option of its table is a
    parameter there, and it never says a second lock() in the holding
    thread waits (it raises Deadlock)."""

    def readme(self) -> str:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "README.md")
        with open(path, encoding="utf-8") as f:
            return f.read()

    def test_signatures_and_option_table_match_the_code(self) -> None:
        import inspect
        import re

        text = self.readme()
        api = text[text.index("## API"):]
        block = api[api.index("```python") : api.index("```", api.index("```python") + 3)]
        for fn in (hold.lock, hold.try_lock):
            m = re.search(r"hold\." + fn.__name__ + r"\((.*?)\) ->", block, re.S)
            assert m is not None, fn.__name__
            shown = set(re.findall(r"(\w+)=", m.group(1))) - {"target"}
            params = {p for p in inspect.signature(fn).parameters if p != "target"}
            self.assertEqual(shown, params, f"README's {fn.__name__} signature")
        table = api[api.index("| option | meaning |"):]
        table = table[: table.index("\n\n")]
        lock_params = set(inspect.signature(hold.lock).parameters)
        for opt in re.findall(r"^\| `(\w+)` \| (`lock`[^|]*)", table, re.M):
            self.assertIn(opt[0], lock_params, f"README's option table lists {opt[0]} for lock()")

    def test_no_contradiction_about_a_second_lock_in_the_thread(self) -> None:
        text = " ".join(self.readme().split())
        self.assertIn("raises `hold.Deadlock` at once", text)
        self.assertNotIn("a second `lock()` of a lock this process holds waits for it", text)


@unittest.skipIf(sys.platform == "win32", "kernel semaphores are unix-only")
class SlotsTest(TempDirTest):
    def test_sync_and_async_holders_share_a_semaphore(self) -> None:
        t = self.path("builds")
        a = hold.lock(t, slots=3)
        b = hold.try_lock(t, slots=3)

        async def third() -> int:
            async with hold.alock(t, slots=3, timeout=HANG) as c:
                self.assertGreater(c.token, b.token)
                with self.assertRaises(hold.Busy):
                    hold.try_lock(t, slots=3)
                return c.slot

        slot_c = asyncio.run(third())
        self.assertEqual(sorted([a.slot, b.slot, slot_c]), [0, 1, 2])
        self.assertGreater(b.token, a.token)
        with self.assertRaises(hold.Invalid) as e:
            hold.try_lock(t, slots=2)
        self.assertIn("3 in use", str(e.exception))
        st = hold.status(t)
        self.assertEqual((st["slots"], st["slots_held"]), (3, 2))
        a.release()
        b.release()
        with hold.lock(t) as plain:
            self.assertEqual(plain.slot, 0)
        with self.assertRaises(hold.Invalid):
            hold.lock(t, slots=0)
        with self.assertRaises(hold.Invalid):
            hold.lock(t, slots="two")  # type: ignore[arg-type]

    def test_update_and_append_take_no_shared_or_slots(self) -> None:
        """update() and append() read or write the file alone under its
        lock: they have no shared or slots parameter (a shared lock or one
        of N slots would let a second writer in, and one change would be
        lost), so passing one is a TypeError, and nothing is written."""
        f = self.path("c.json")
        with open(f, "w") as out:
            out.write("0")
        for kw in ({"shared": True}, {"slots": 4}, {"slots": 1}):
            with self.assertRaises(TypeError):
                hold.update(f, lambda old: str(int(old) + 1), **kw)  # type: ignore[call-overload]
            with self.assertRaises(TypeError):
                hold.append(f, "1", **kw)  # type: ignore[call-overload]
            with self.assertRaises(TypeError):
                asyncio.run(hold.aupdate(f, lambda old: str(int(old) + 1), **kw))  # type: ignore[call-overload]
            with self.assertRaises(TypeError):
                asyncio.run(hold.aappend(f, "1", **kw))  # type: ignore[call-overload]
        with open(f) as inp:
            self.assertEqual(inp.read(), "0")
