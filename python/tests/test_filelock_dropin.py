"""A project's own tests of its filelock use, run unchanged against filelock
and against hold.filelock: only the import differs (the module under test
is a parameter, MODULE). Then what only filelock's newest release has, and
what hold adds, against hold.filelock, and the two exclusions between real
filelock processes and hold.filelock.

Runs under unittest (the package's test setup) and pytest alike."""

from __future__ import annotations

import asyncio
import errno
import importlib
import logging
import os
import subprocess
import sys
import threading
import time
import unittest
from types import ModuleType
from typing import Any, List, Optional

from helpers import HANG, TempDirTest, hold

import hold.filelock

try:
    real_filelock: Optional[ModuleType] = importlib.import_module("filelock")
except ImportError:
    real_filelock = None


def _need_filelock(test: unittest.TestCase) -> ModuleType:
    if real_filelock is None:
        if os.environ.get("HOLD_TEST_NOSKIP"):
            test.fail("the filelock module is not installed (Debian package python3-filelock)")
        test.skipTest("the filelock module is not installed (Debian package python3-filelock)")
    return real_filelock


class ProjectTests:
    """The tests a project would have written for its filelock use (on
    filelock's documented examples), against MODULE."""

    MODULE: Any = None
    dir: str
    path: Any  # TempDirTest's

    @property
    def m(self) -> Any:
        return self.MODULE

    def test_with_statement_holds_and_releases(self) -> None:
        lock = self.m.FileLock(self.path("high_ground.txt.lock"))
        with lock:
            self.assertTrue(lock.is_locked)
            with open(self.path("high_ground.txt"), "a") as f:
                f.write("You were the chosen one.")
        self.assertFalse(lock.is_locked)
        self.assertEqual(lock.lock_file, self.path("high_ground.txt.lock"))
        self.assertTrue(os.path.exists(self.path("high_ground.txt.lock")))

    def test_acquire_returns_a_context_manager(self) -> None:
        lock = self.m.FileLock(self.path("x.lock"))
        with lock.acquire(timeout=5) as got:
            self.assertIs(got, lock)
            self.assertTrue(lock.is_locked)
        self.assertFalse(lock.is_locked)
        lock.acquire()
        try:
            self.assertTrue(lock.is_locked)
        finally:
            lock.release()
        self.assertFalse(lock.is_locked)

    def test_nested_locks_are_released_by_the_outermost(self) -> None:
        lock = self.m.FileLock(self.path("x.lock"))
        with lock:
            with lock:
                with lock.acquire():
                    self.assertTrue(lock.is_locked)
                self.assertTrue(lock.is_locked)
            self.assertTrue(lock.is_locked)
        self.assertFalse(lock.is_locked)
        lock.acquire()
        lock.acquire()
        lock.release(force=True)
        self.assertFalse(lock.is_locked)

    def _hold_in_thread(self, path: str) -> "tuple[threading.Event, threading.Thread]":
        held, done = threading.Event(), threading.Event()

        def run() -> None:
            other = self.m.FileLock(path)
            with other:
                held.set()
                done.wait(HANG)

        t = threading.Thread(target=run)
        t.start()
        self.assertTrue(held.wait(HANG))
        return done, t

    def test_timeout_when_another_thread_holds_it(self) -> None:
        path = self.path("x.lock")
        done, t = self._hold_in_thread(path)
        try:
            lock = self.m.FileLock(path, timeout=0.2)
            with self.assertRaises(self.m.Timeout) as cm:
                with lock:
                    self.fail("locked twice")
            self.assertFalse(lock.is_locked)
            self.assertEqual(cm.exception.lock_file, path)
            self.assertEqual(str(cm.exception), f"The file lock '{path}' could not be acquired.")
            self.assertIsInstance(cm.exception, TimeoutError)
            with self.assertRaises(self.m.Timeout):
                lock.acquire(timeout=0)
            with self.assertRaises(self.m.Timeout):
                lock.acquire(blocking=False)
            # The documented pattern.
            try:
                with lock.acquire(timeout=0.1):
                    self.fail("locked twice")
            except self.m.Timeout:
                pass
        finally:
            done.set()
            t.join(HANG)
        with self.m.FileLock(path, timeout=HANG):
            pass

    def test_second_object_in_the_same_thread_times_out(self) -> None:
        path = self.path("x.lock")
        with self.m.FileLock(path):
            with self.assertRaises(self.m.Timeout):
                self.m.FileLock(path).acquire(timeout=0.2)
            with self.assertRaises(self.m.Timeout):
                self.m.FileLock(path).acquire(blocking=False)

    def test_threads_take_turns(self) -> None:
        path, counter = self.path("count.lock"), self.path("count")
        with open(counter, "w") as f:
            f.write("0")
        errors: List[BaseException] = []

        def work() -> None:
            try:
                lock = self.m.FileLock(path, timeout=HANG)
                for _ in range(20):
                    with lock:
                        with open(counter) as f:
                            n = int(f.read())
                        time.sleep(0.0005)
                        with open(counter, "w") as f:
                            f.write(str(n + 1))
            except BaseException as e:  # reported by the test's thread
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(HANG)
        self.assertEqual(errors, [])
        with open(counter) as f:
            self.assertEqual(f.read(), "80")

    def test_timeout_property(self) -> None:
        lock = self.m.FileLock(self.path("x.lock"))
        self.assertEqual(lock.timeout, -1)
        lock.timeout = "0.5"
        self.assertEqual(lock.timeout, 0.5)
        self.assertEqual(self.m.FileLock(self.path("y.lock"), timeout=3).timeout, 3)

    def test_decorator(self) -> None:
        lock = self.m.FileLock(self.path("x.lock"))

        @lock
        def critical() -> bool:
            return bool(lock.is_locked)

        self.assertTrue(critical())
        self.assertFalse(lock.is_locked)

    def test_soft_file_lock(self) -> None:
        path = self.path("soft.lock")
        lock = self.m.SoftFileLock(path, timeout=0.2)
        with lock:
            self.assertTrue(lock.is_locked)
            self.assertTrue(os.path.exists(path))
            with self.assertRaises(self.m.Timeout):
                self.m.SoftFileLock(path).acquire(timeout=0.2)
        self.assertFalse(lock.is_locked)
        self.assertFalse(os.path.exists(path))

    def test_bad_paths_are_oserrors(self) -> None:
        with self.assertRaises(FileNotFoundError) as cm:
            self.m.FileLock("").acquire()
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        os.mkdir(self.path("d"))
        for p in (".", self.path("d")):
            with self.assertRaises(IsADirectoryError) as cm2:
                self.m.FileLock(p).acquire(timeout=0)
            self.assertEqual(cm2.exception.errno, errno.EISDIR)

    def test_debug_log_lines(self) -> None:
        lock = self.m.FileLock(self.path("x.lock"))
        with self.assertLogs("filelock", logging.DEBUG) as cm:
            with lock:
                pass
        want = [
            f"DEBUG:filelock:Attempting to acquire lock {id(lock)} on {lock.lock_file}",
            f"DEBUG:filelock:Lock {id(lock)} acquired on {lock.lock_file}",
            f"DEBUG:filelock:Attempting to release lock {id(lock)} on {lock.lock_file}",
            f"DEBUG:filelock:Lock {id(lock)} released on {lock.lock_file}",
        ]
        self.assertEqual(cm.output, want)


class WithFilelock(ProjectTests, TempDirTest):
    """The project's tests against filelock itself."""

    def setUp(self) -> None:
        super().setUp()
        self.MODULE = _need_filelock(self)


class WithHoldFilelock(ProjectTests, TempDirTest):
    """The same tests, the import switched to hold.filelock."""

    MODULE = hold.filelock


class NewerOptionsTest(TempDirTest):
    """What filelock's newest release documents (and the Debian one lacks),
    and what hold adds, against hold.filelock."""

    def test_missing_directories_are_made(self) -> None:
        # filelock's newer releases make the lock file's missing parent
        # directories; hold.filelock asks hold for that (make_dirs), which
        # hold.lock() leaves off by default.
        lock = hold.filelock.FileLock(self.path("cache", "deep", "x.lock"))
        with lock:
            self.assertTrue(os.path.exists(self.path("cache", "deep", "x.lock")))
        with self.assertRaises(FileNotFoundError):
            hold.lock(lock_file=self.path("other", "y.lock"))

    def test_lock_counter_and_defaults(self) -> None:
        lock = hold.filelock.FileLock(self.path("x.lock"))
        self.assertEqual((lock.timeout, lock.blocking, lock.poll_interval, lock.mode), (-1, True, 0.05, 0o644))
        self.assertTrue(lock.is_thread_local())
        self.assertFalse(lock.is_singleton)
        self.assertFalse(lock.has_explicit_mode)
        self.assertEqual((lock.context_error_policy, lock.close_error_policy), ("chain", "default"))
        self.assertEqual((lock.fallback_to_soft, lock.preserve_lock_file, lock.on_acquired), (True, False, None))
        with lock:
            with lock:
                self.assertEqual(lock.lock_counter, 2)
            self.assertEqual(lock.lock_counter, 1)
        self.assertEqual(lock.lock_counter, 0)
        with self.assertRaises(hold.filelock.Timeout):
            with lock:
                with hold.filelock.FileLock(self.path("x.lock")).acquire(timeout=0.1):
                    pass
        self.assertEqual(lock.lock_counter, 0)

    def test_blocking_default_and_platform_names(self) -> None:
        path = self.path("x.lock")
        self.assertIs(hold.filelock.UnixFileLock, hold.filelock.FileLock)
        with hold.filelock.UnixFileLock(path):
            lock = hold.filelock.FileLock(path, blocking=False)
            self.assertFalse(lock.blocking)
            with self.assertRaises(hold.filelock.Timeout):
                lock.acquire()
            lock.blocking = True
            with self.assertRaises(hold.filelock.Timeout):
                lock.acquire(timeout=0.05)
            with self.assertWarns(DeprecationWarning):
                with self.assertRaises(hold.filelock.Timeout):
                    lock.acquire(timeout=0.05, poll_intervall=0.01)

    def test_timeout_is_holds_and_pickles(self) -> None:
        import pickle

        e = hold.filelock.Timeout("a.lock")
        self.assertIsInstance(e, hold.Timeout)
        self.assertIsInstance(e, hold.HoldError)
        back = pickle.loads(pickle.dumps(e))
        self.assertEqual((type(back), back.lock_file, str(back)), (hold.filelock.Timeout, "a.lock", str(e)))

    def test_endless_wait_on_own_lock_is_a_deadlock(self) -> None:
        path = self.path("x.lock")
        with hold.filelock.FileLock(path):
            with self.assertRaises(RuntimeError) as cm:
                hold.filelock.FileLock(path).acquire()
            self.assertIsInstance(cm.exception, hold.Deadlock)
            self.assertIn("is already held by a different FileLock instance in this thread", str(cm.exception))

    def test_thread_local_choice(self) -> None:
        path = self.path("x.lock")
        shared = hold.filelock.FileLock(path, thread_local=False)
        own = hold.filelock.FileLock(self.path("y.lock"))  # thread-local, the default
        got: List[Any] = []
        with shared, own:

            def other() -> None:
                # The shared object is held: this thread counts up. The
                # thread-local one is this thread's own: it must wait.
                with shared.acquire(timeout=0):
                    got.append(shared.lock_counter)
                got.append(own.is_locked)
                try:
                    own.acquire(timeout=0.1)
                except hold.filelock.Timeout:
                    got.append("timeout")

            t = threading.Thread(target=other)
            t.start()
            t.join(HANG)
        self.assertEqual(got, [2, False, "timeout"])

    def test_singleton(self) -> None:
        a = hold.filelock.FileLock(self.path("x.lock"), is_singleton=True)
        b = hold.filelock.FileLock(os.path.join(self.dir, ".", "x.lock"), is_singleton=True)
        self.assertIs(a, b)
        self.assertTrue(a.is_singleton)
        with self.assertRaises(ValueError) as cm:
            hold.filelock.FileLock(self.path("x.lock"), timeout=3, is_singleton=True)
        self.assertIn("timeout (existing lock has -1 but 3 was passed)", str(cm.exception))
        with a:
            with b:  # the same object: re-entrant, no deadlock
                self.assertEqual(a.lock_counter, 2)

    def test_explicit_mode_is_exact(self) -> None:
        old = os.umask(0o022)
        try:
            with hold.filelock.FileLock(self.path("m.lock"), mode=0o666):
                pass
            with hold.filelock.FileLock(self.path("n.lock")):
                pass
        finally:
            os.umask(old)
        self.assertEqual(os.stat(self.path("m.lock")).st_mode & 0o777, 0o666)
        self.assertEqual(os.stat(self.path("n.lock")).st_mode & 0o777, 0o644)

    def test_on_acquired(self) -> None:
        seen: List[int] = []

        def hook(fd: int) -> None:
            os.fstat(fd)  # a live descriptor of the lock file
            seen.append(fd)

        lock = hold.filelock.FileLock(self.path("x.lock"), on_acquired=hook)
        with lock:
            with lock:
                pass
        self.assertEqual(len(seen), 1)

        def fail(fd: int) -> None:
            raise KeyError("no")

        bad = hold.filelock.FileLock(self.path("x.lock"), on_acquired=fail)
        with self.assertRaises(KeyError):
            bad.acquire()
        self.assertFalse(bad.is_locked)
        with hold.filelock.FileLock(self.path("x.lock")).acquire(timeout=0):
            pass  # released again
        with self.assertRaises(ValueError):
            hold.filelock.SoftFileLock(self.path("s.lock"), on_acquired=hook)
        with self.assertRaises(ValueError):
            hold.filelock.SoftFileLock(self.path("s.lock"), preserve_lock_file=True)

    def test_cancel_check(self) -> None:
        path = self.path("x.lock")
        p = self.python(
            "import sys, hold\nl = hold.lock(lock_file=sys.argv[1])\nprint('held', flush=True)\nsys.stdin.read()\n",
            path, stdin=subprocess.PIPE,
        )
        try:
            assert p.stdout is not None
            self.assertEqual(p.stdout.readline().strip(), "held")
            calls: List[int] = []

            def cancel() -> bool:
                calls.append(1)
                return len(calls) >= 3

            with self.assertRaises(hold.filelock.Timeout):
                hold.filelock.FileLock(path).acquire(poll_interval=0.01, cancel_check=cancel)
            self.assertEqual(len(calls), 3)
        finally:
            p.communicate("", timeout=HANG)

    def test_bad_options(self) -> None:
        for kw in ({"context_error_policy": "x"}, {"close_error_policy": "x"}):
            with self.assertRaises(ValueError):
                hold.filelock.FileLock(self.path("x.lock"), **kw)
        with self.assertWarns(UserWarning):
            lock = hold.filelock.FileLock(self.path("x.lock"), lifetime=5)
        self.assertIsNone(lock.lifetime)

    @unittest.skipIf(sys.version_info < (3, 11), "exception groups are Python 3.11's")
    def test_context_error_policy_group(self) -> None:
        lock = hold.filelock.FileLock(self.path("x.lock"), context_error_policy="group")

        def broken_release(force: bool = False) -> None:
            raise OSError("release failed")

        lock.release = broken_release  # type: ignore[method-assign]
        with self.assertRaises(BaseExceptionGroup) as cm:  # noqa: F821 (3.11 builtin)
            with lock:
                raise KeyError("body")
        kinds = [type(e) for e in cm.exception.exceptions]
        self.assertEqual(kinds, [KeyError, OSError])
        del lock.release
        lock.release(force=True)


class AsyncTest(TempDirTest):
    """AsyncFileLock and AsyncSoftFileLock (filelock's newest API)."""

    def run_async(self, coro: Any) -> Any:
        return asyncio.run(asyncio.wait_for(coro, HANG))

    def test_async_with_and_tasks_exclude(self) -> None:
        path = self.path("x.lock")
        order: List[str] = []

        async def worker(name: str) -> None:
            async with hold.filelock.AsyncFileLock(path):
                order.append(name + " in")
                await asyncio.sleep(0.05)
                order.append(name + " out")

        async def main() -> None:
            await asyncio.gather(worker("a"), worker("b"))

        self.run_async(main())
        self.assertEqual([s.split()[1] for s in order], ["in", "out", "in", "out"])

    def test_second_object_in_a_task_does_not_wait_forever(self) -> None:
        path = self.path("x.lock")

        async def main() -> None:
            first = hold.filelock.AsyncFileLock(path)
            async with first:
                self.assertTrue(first.is_locked)
                with self.assertRaises(hold.filelock.Timeout):
                    await hold.filelock.AsyncFileLock(path).acquire(timeout=0.2)
                with self.assertRaises(hold.Deadlock):
                    await hold.filelock.AsyncFileLock(path).acquire()
                await first.acquire()
                self.assertEqual(first.lock_counter, 2)
                await first.release()
            self.assertFalse(first.is_locked)
            async with hold.filelock.AsyncFileLock(path, timeout=0):
                pass

        self.run_async(main())

    def test_tasks_waiting_on_one_shared_object_all_get_it(self) -> None:
        path = self.path("x.lock")
        order: List[str] = []

        async def user(lock: Any, name: str) -> None:
            async with lock:
                order.append(name)
                await asyncio.sleep(0.01)

        async def main() -> None:
            first = hold.filelock.AsyncFileLock(path)
            shared = hold.filelock.AsyncFileLock(path)
            await first.acquire()
            waiting = [asyncio.ensure_future(user(shared, n)) for n in ("a", "b")]
            await asyncio.sleep(0.1)
            self.assertEqual(order, [])
            await first.release()
            await asyncio.gather(*waiting)
            self.assertFalse(shared.is_locked)
            self.assertEqual(shared.lock_counter, 0)
            async with hold.filelock.AsyncFileLock(path, timeout=0):
                pass

        self.run_async(main())
        self.assertEqual(sorted(order), ["a", "b"])

    def test_async_on_acquired_and_singleton(self) -> None:
        seen: List[int] = []
        path = self.path("x.lock")

        hook = seen.append  # one object: a singleton's hook compares by identity

        async def main() -> None:
            a = hold.filelock.AsyncFileLock(path, is_singleton=True, on_acquired=hook)
            self.assertIs(hold.filelock.AsyncFileLock(path, is_singleton=True, on_acquired=hook), a)
            with self.assertRaises(ValueError):
                hold.filelock.AsyncFileLock(path, is_singleton=True, on_acquired=seen.append)
            async with a:
                async with hold.filelock.AsyncFileLock(path, is_singleton=True, on_acquired=hook):
                    self.assertEqual(a.lock_counter, 2)
            self.assertFalse(a.is_locked)

        self.run_async(main())
        self.assertEqual(len(seen), 1)

    def test_plain_with_is_refused_and_soft_works(self) -> None:
        lock = hold.filelock.AsyncFileLock(self.path("x.lock"))
        with self.assertRaises(NotImplementedError):
            with lock:
                pass
        with self.assertRaises(ValueError):
            hold.filelock.AsyncFileLock(self.path("x.lock"), thread_local=True)

        async def main() -> None:
            soft = hold.filelock.AsyncSoftFileLock(self.path("s.lock"))
            async with soft:
                self.assertTrue(os.path.exists(self.path("s.lock")))
            self.assertFalse(os.path.exists(self.path("s.lock")))

        self.run_async(main())


class ExcludesFilelockTest(TempDirTest):
    """A real filelock in another process and hold.filelock exclude each
    other on the same path, both ways, for FileLock and SoftFileLock."""

    def holder(self, module: str, cls: str, path: str) -> "subprocess.Popen[str]":
        code = (
            f"import sys\nfrom {module} import {cls}\nl = {cls}(sys.argv[1])\nl.acquire()\n"
            "print('held', flush=True)\nsys.stdin.read()\nl.release()\n"
        )
        p = self.python(code, path, stdin=subprocess.PIPE)
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        if line != "held":
            p.kill()
            self.fail(f"{module}.{cls} holder did not start: {line!r} {p.communicate()[1]}")
        return p

    def release(self, p: "subprocess.Popen[str]") -> None:
        out, err = p.communicate("", timeout=HANG)
        self.assertEqual(p.returncode, 0, f"holder failed: {out}\n{err}")

    def both_ways(self, cls: str) -> None:
        fl = _need_filelock(self)
        path = self.path(cls + ".lock")
        p = self.holder("filelock", cls, path)
        try:
            with self.assertRaises(hold.filelock.Timeout):
                getattr(hold.filelock, cls)(path).acquire(timeout=0.3)
        finally:
            self.release(p)
        with getattr(hold.filelock, cls)(path).acquire(timeout=HANG):
            pass
        p = self.holder("hold.filelock", cls, path)
        try:
            with self.assertRaises(fl.Timeout):
                getattr(fl, cls)(path).acquire(timeout=0.3)
        finally:
            self.release(p)
        with getattr(fl, cls)(path).acquire(timeout=HANG):
            pass

    def test_file_lock(self) -> None:
        self.both_ways("FileLock")

    def test_soft_file_lock(self) -> None:
        fl = _need_filelock(self)
        if int(str(getattr(fl, "__version__", "0")).split(".")[0]) < 4:
            self.both_ways("SoftFileLock")
            return
        # filelock 4 writes its holder (pid, host, start time) into the
        # soft lock file: hold waits for that holder, and takes the lock
        # when it lets go. hold's soft lock is such a file too, naming
        # hold's agent: filelock waits for it the same way.
        path = self.path("SoftFileLock.lock")
        p = self.holder("filelock", "SoftFileLock", path)
        got = threading.Event()

        def wait_for_it() -> None:
            with hold.filelock.SoftFileLock(path).acquire(timeout=HANG):
                got.set()

        t = threading.Thread(target=wait_for_it)
        try:
            with self.assertRaises(hold.filelock.Timeout):
                hold.filelock.SoftFileLock(path).acquire(timeout=0.3)
            t.start()
            self.assertFalse(got.wait(1.0), "hold took a live filelock holder's lock")
        finally:
            self.release(p)
        t.join(HANG)
        self.assertTrue(got.is_set(), "hold did not get the lock once filelock released it")
        self.assertFalse(os.path.exists(path))
        p = self.holder("hold.filelock", "SoftFileLock", path)
        try:
            with self.assertRaises(fl.Timeout):
                fl.SoftFileLock(path).acquire(timeout=0.3)
        finally:
            self.release(p)
        with fl.SoftFileLock(path).acquire(timeout=HANG):
            pass

if __name__ == "__main__":
    unittest.main()
