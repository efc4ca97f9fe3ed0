"""What filelock's users expect: OSError classes for file errors, a NUL byte
refused as a bad name, re-entrant Lock objects, a same-thread deadlock
raised at once, and async forms of update, append and status."""

from __future__ import annotations

import asyncio
import errno
import os
import threading
import time

import subprocess
import sys

from helpers import HANG, TempDirTest, hold, hold_binary


class FileErrorTest(TempDirTest):
    def test_missing_directories_only_with_make_dirs_and_mode_is_the_lock_files(self) -> None:
        # A missing directory is an error, as for the hold command, Go and
        # Node, and the hint names the option that makes it.
        for call in (hold.lock, hold.try_lock):
            with self.assertRaises(FileNotFoundError) as cm:
                call(self.path("cache", "deep", "x"))
            self.assertIsInstance(cm.exception, hold.NotFound)
            self.assertIn("make_dirs", str(cm.exception))
        self.assertFalse(os.path.exists(self.path("cache")))
        with self.assertRaises(hold.Invalid):
            hold.lock(self.path("z"), make_dirs="yes")
        old = os.umask(0o022)
        try:
            with hold.lock(self.path("cache", "deep", "x"), mode=0o640, make_dirs=True) as l:
                self.assertEqual(l.path, self.path("cache", "deep", "x.lock"))
            with hold.try_lock(self.path("other", "y"), make_dirs=True):
                pass
        finally:
            os.umask(old)
        for d in ("cache", os.path.join("cache", "deep"), "other"):
            self.assertEqual(os.stat(self.path(d)).st_mode & 0o777, 0o755, d)
        self.assertEqual(os.stat(self.path("cache", "deep", "x.lock")).st_mode & 0o777, 0o640)
        self.assertEqual(os.stat(self.path("other", "y.lock")).st_mode & 0o777, 0o644)
        with self.assertRaises(hold.Invalid):
            hold.lock(self.path("z"), mode=0o1777)

    def test_file_errors_are_oserrors_with_hold_codes(self) -> None:
        with self.assertRaises(FileNotFoundError) as cm:
            hold.update(self.path("missing", "x"), lambda s: s, must_exist=True)
        e = cm.exception
        self.assertIsInstance(e, hold.HoldError)
        self.assertIsInstance(e, hold.NotFound)
        self.assertEqual((e.code, e.errno), ("ENOENT", errno.ENOENT))
        self.assertNotIn("[Errno", str(e))
        os.mkdir(self.path("d"))
        with self.assertRaises(IsADirectoryError) as cm2:
            hold.append(self.path("d"), "x")
        self.assertEqual(cm2.exception.code, "EISDIR")
        with self.assertRaises(FileNotFoundError):
            hold.append(self.path("nope"), "x", must_exist=True)
        if os.geteuid() != 0:
            os.mkdir(self.path("ro"), 0o500)
            with self.assertRaises(PermissionError) as cm3:
                hold.lock(self.path("ro", "x"))
            self.assertEqual(cm3.exception.code, "EACCES")

    def test_nul_byte_is_invalid(self) -> None:
        for call in (
            lambda: hold.lock(self.path("a\0b")),
            lambda: hold.try_lock(self.path("a"), lock_file=self.path("x\0.lock")),
            lambda: hold.update(self.path("f\0"), lambda s: s),
            lambda: hold.status(self.path("\0")),
        ):
            with self.assertRaises(hold.Invalid) as cm:
                call()
            self.assertEqual(cm.exception.code, "EINVAL")
            self.assertIn("NUL", str(cm.exception))


class ReentrancyTest(TempDirTest):
    def test_same_lock_object_counts_up_and_down(self) -> None:
        t = self.path("t")
        l = hold.lock(t)
        with l:
            with l:
                with l:
                    pass
                with self.assertRaises(hold.Busy):
                    hold.try_lock(t)  # still held by the outer blocks
            with self.assertRaises(hold.Busy):
                hold.try_lock(t)
        hold.try_lock(t).release()  # released by the outermost block

    def _bounded(self, fn):
        """Runs fn in a thread; fails if it does not end within 2 s (a hang bound)."""
        out = {}

        def run() -> None:
            try:
                out["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - handed to the test
                out["error"] = e

        th = threading.Thread(target=run, daemon=True)
        th.start()
        th.join(2 * 5)  # generous on a loaded machine
        self.assertFalse(th.is_alive(), "the call hung")
        return out

    def test_second_object_in_same_thread_is_a_deadlock_at_once(self) -> None:
        t = self.path("t")

        def nested():
            with hold.lock(t) as outer:
                pid = outer.owner["pid"]  # read while held: see Lock.token
                try:
                    hold.lock(t)
                except hold.Deadlock as e:
                    return e, pid
                return None, pid

        out = self._bounded(nested)
        self.assertNotIn("error", out, out.get("error"))
        e, pid = out["value"]
        self.assertIsNotNone(e, "a second lock() of a lock this thread holds was granted")
        self.assertIsInstance(e, RuntimeError)
        self.assertEqual(e.code, "EDEADLK")
        self.assertIn(f"held by pid {pid}", str(e))
        self.assertIn("the caller itself", str(e))
        # update and append of a file whose lock this thread holds, too.
        f = self.path("f")

        def nested_update():
            with hold.lock(f):
                for call in (lambda: hold.update(f, lambda s: s + "x"), lambda: hold.append(f, "x")):
                    try:
                        call()
                        return "granted"
                    except hold.Deadlock:
                        pass
            return "ok"

        self.assertEqual(self._bounded(nested_update).get("value"), "ok")

    def test_another_spelling_in_same_thread_is_a_deadlock_at_once(self) -> None:
        # One lock, however it is spelled: through a symlinked directory,
        # with "..", relative for absolute. The message names this program,
        # not the agent that serves it.
        real = self.path("real")
        os.mkdir(real)
        os.symlink(real, self.path("link"))
        t = os.path.join(real, "t")
        rel = os.path.relpath(t)

        def nested():
            out = []
            with hold.lock(t):
                for other in (self.path("link", "t"), os.path.join(real, "..", "real", "t"), rel):
                    try:
                        hold.lock(other, timeout=60).release()
                        out.append("granted")
                    except hold.Deadlock as e:
                        out.append(str(e))
            return out

        out = self._bounded(nested)
        self.assertNotIn("error", out, out.get("error"))
        self.assertEqual(len(out["value"]), 3)
        for msg in out["value"]:
            self.assertRegex(msg, rf"the caller itself \(pid {os.getpid()}, through hold pid \d+")

    def test_another_threads_lock_is_waited_for(self) -> None:
        t = self.path("t")
        held = threading.Event()
        release = threading.Event()

        def holder() -> None:
            with hold.lock(t):
                held.set()
                release.wait(HANG)

        th = threading.Thread(target=holder)
        th.start()
        self.assertTrue(held.wait(HANG))
        try:
            with self.assertRaises(hold.Timeout):
                hold.lock(t, timeout=0.3)
        finally:
            release.set()
            th.join(HANG)
        with hold.lock(t, timeout=HANG):
            pass


class AsyncFormsTest(TempDirTest):
    def test_aupdate_aappend_astatus(self) -> None:
        f = self.path("f")

        async def main() -> None:
            async def add(old: str) -> str:
                await asyncio.sleep(0)
                return old + "a"

            self.assertTrue(await hold.aupdate(f, add))
            self.assertTrue(await hold.aupdate(f, lambda s: s + "b"))
            await hold.aappend(f, "c")
            self.assertEqual((await hold.astatus(f))["state"], "free")
            # A wait does not block the loop: a ticker runs meanwhile.
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.01)

            tick = asyncio.ensure_future(ticker())
            async with hold.alock(f):
                done = threading.Event()

                def later() -> None:
                    time.sleep(0.3)
                    done.set()

                threading.Thread(target=later).start()
                other = asyncio.ensure_future(hold.aappend(f, "d"))
                await asyncio.sleep(0.3)
                self.assertFalse(other.done())
            await asyncio.wait_for(other, HANG)
            tick.cancel()
            self.assertGreater(ticks, 5)

        asyncio.run(main())
        with open(f) as fh:
            self.assertEqual(fh.read(), "abcd")


class AncestorDeadlockTest(TempDirTest):
    def test_lock_held_by_hold_run_ancestor_is_a_deadlock_at_once(self) -> None:
        # hold run releases its lock only when its command ends: a command
        # that waits for the same lock would wait for ever.
        t = self.path("t")
        code = (
            "import hold, sys\n"
            "for f in (lambda: hold.lock(sys.argv[1]), lambda: hold.lock(sys.argv[1], timeout=60),\n"
            "          lambda: hold.append(sys.argv[1], 'x')):\n"
            "    try:\n"
            "        f(); print('granted')\n"
            "    except hold.Deadlock as e:\n"
            "        print(e.code, e)\n"
        )
        r = subprocess.run(
            [hold_binary(), "run", t, "--", sys.executable, "-c", code, t],
            cwd=self.dir, capture_output=True, text=True, timeout=20,
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.strip().split("\n")
        self.assertEqual(len(lines), 3, r.stdout)
        for line in lines:
            self.assertRegex(line, r"^EDEADLK acquire .*deadlock: held by pid \d+ .*is an ancestor of this process \(pid \d+, through hold pid \d+\) that waits for it")
