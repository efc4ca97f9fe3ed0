"""hold.filelock against filelock 4.3's public API: every name, and the
behaviours issue 56 found different (parent directories of soft locks,
context_error_policy="group" through acquire(), singletons of subclasses,
fork, cancel_check on a lock this thread holds, on_acquired in an
executor, a path under a file, writers before new readers)."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
import unittest
import warnings

import hold
import hold.filelock as hf
from helpers import HANG, TempDirTest

try:
    import filelock as _filelock
except ImportError:  # pragma: no cover
    _filelock = None

#: filelock 4.3.1's __all__, for machines whose filelock is older.
FILELOCK_ALL = """AcquireReturnProxy AcquireWait AsyncAcquireReadWriteReturnProxy AsyncAcquireReturnProxy
AsyncAcquireSoftReadWriteReturnProxy AsyncFileLock AsyncReadWriteLock AsyncSoftFileLease AsyncSoftFileLock
AsyncSoftReadWriteLock AsyncStrictSoftFileLock AsyncUnixFileLock AsyncWindowsFileLock BaseAsyncFileLock BaseFileLock
CloseErrorPolicy CompromiseReason ContextErrorPolicy FileLock FileLockContext InFlight LeaseClaim LeaseCompromise
LeaseHeartbeat LeaseSettingsMismatch LockOptions MarkerSoftFileLock OwnerMode OwnerRecord ReadWriteLock
ReleasePendingError SoftFileLease SoftFileLock SoftFileLockLifetimeWarning SoftFileLockProtocolError SoftReadWriteLock
StrictRelease StrictSoftFileClaim StrictSoftFileClaimState StrictSoftFileLock Timeout UnixFileLock WindowsFileLock
__version__ asyncio has_fcntl lock_descriptor unlock_descriptor""".split()


class PublicNamesTest(unittest.TestCase):
    def test_every_name_of_filelock(self) -> None:
        names = set(FILELOCK_ALL)
        if _filelock is not None and getattr(_filelock, "__version__", "0") >= "4.3":
            names |= set(_filelock.__all__)
            names |= {"asyncio." + n for n in _filelock.asyncio.__all__}
        missing = []
        for name in sorted(names):
            obj = hf
            for part in name.split("."):
                obj = getattr(obj, part, None)
            if obj is None:
                missing.append(name)
        self.assertEqual(missing, [])
        self.assertEqual(sorted(hf.__all__), sorted(FILELOCK_ALL))

    def test_lock_descriptor_excludes_filelock_lock(self) -> None:
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "x.lock")
            fd = os.open(path, os.O_RDWR | os.O_CREAT)
            self.addCleanup(os.close, fd)
            self.assertTrue(hf.lock_descriptor(fd, blocking=False))
            with self.assertRaises(hf.Timeout):
                hf.FileLock(path).acquire(timeout=0)
            hf.unlock_descriptor(fd)
            with hf.FileLock(path, timeout=HANG):
                self.assertFalse(hf.lock_descriptor(fd, blocking=False))


class BugsTest(TempDirTest):
    def test_soft_lock_makes_missing_directories(self) -> None:
        for cls in (hf.SoftFileLock, hf.StrictSoftFileLock, hf.SoftFileLease):
            path = self.path(cls.__name__, "a", "b", "x.lock")
            with cls(path, timeout=HANG) as lock:
                self.assertTrue(lock.is_locked)

    def test_path_under_a_file(self) -> None:
        with open(self.path("file"), "w"):
            pass
        for cls in (hf.FileLock, hf.SoftFileLock):
            with self.assertRaises(NotADirectoryError):
                cls(self.path("file", "sub", "x.lock")).acquire(timeout=0)

    @unittest.skipIf(sys.version_info < (3, 11), "exception groups need Python 3.11")
    def test_group_policy_through_acquire_keeps_both_errors(self) -> None:
        lock = hf.FileLock(self.path("x.lock"), context_error_policy="group")

        def failing_release(force: bool = False) -> None:
            hf.FileLock.release(lock, force=True)
            raise OSError("release failed")

        lock.release = failing_release  # type: ignore[method-assign]
        body = ValueError("body")
        with self.assertRaises(BaseExceptionGroup) as caught:  # noqa: F821
            with lock.acquire():
                raise body
        errors = caught.exception.exceptions
        self.assertEqual([type(e) for e in errors], [ValueError, OSError])
        # No cycle: the release error no longer has the body's as context.
        self.assertIsNone(errors[1].__context__)

    def test_singleton_subclass_init_runs_once(self) -> None:
        calls = []

        class Counted(hf.FileLock):
            def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
                calls.append(1)
                super().__init__(*args, **kwargs)

        a = Counted(self.path("x.lock"), is_singleton=True)
        b = Counted(self.path("x.lock"), is_singleton=True)
        self.assertIs(a, b)
        self.assertEqual(len(calls), 1)
        with self.assertRaises(ValueError):
            Counted(self.path("x.lock"), is_singleton=True, timeout=3)

    def test_lifetime_setter(self) -> None:
        lock = hf.SoftFileLock(self.path("x.lock"))
        with self.assertWarns(hf.SoftFileLockLifetimeWarning):
            lock.lifetime = 5
        self.assertIsNone(lock.lifetime)
        with self.assertRaises(ValueError):
            lock.lifetime = -1
        with self.assertRaises(TypeError):
            lock.lifetime = "5"  # type: ignore[assignment]


class SemanticsTest(TempDirTest):
    def test_cancel_check_on_a_lock_this_thread_holds(self) -> None:
        with hf.FileLock(self.path("x.lock")):
            other = hf.FileLock(self.path("x.lock"))
            with self.assertRaises(RuntimeError) as caught:
                other.acquire(cancel_check=lambda: False, poll_interval=0.01)
            self.assertNotIsInstance(caught.exception, hf.Timeout)

    @unittest.skipUnless(hasattr(os, "fork"), "needs fork()")
    def test_fork_child_finds_inherited_lock_not_held(self) -> None:
        lock = hf.FileLock(self.path("x.lock"))
        with lock:
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: report, never return into the test runner
                code = 1
                try:
                    ok = not lock.is_locked and lock.lock_counter == 0
                    try:
                        lock.acquire(timeout=0)
                        ok = False
                    except RuntimeError:
                        pass
                    try:  # a new object: the parent holds the lock
                        hf.FileLock(self.path("x.lock")).acquire(timeout=0)
                        ok = False
                    except hf.Timeout:
                        pass
                    os.write(w, b"ok" if ok else b"no")
                    code = 0
                finally:
                    os._exit(code)
            os.close(w)
            got = os.read(r, 2)
            os.close(r)
            _, status = os.waitpid(pid, 0)
        self.assertEqual((got, os.waitstatus_to_exitcode(status)), (b"ok", 0))

    def test_on_acquired_runs_off_the_event_loop(self) -> None:
        threads = []

        async def main() -> None:
            lock = hf.AsyncFileLock(self.path("x.lock"), on_acquired=lambda fd: threads.append(threading.get_ident()))
            async with lock:
                pass
            return threading.get_ident()

        loop_thread = asyncio.run(asyncio.wait_for(main(), HANG))
        self.assertEqual(len(threads), 1)
        self.assertNotEqual(threads[0], loop_thread)

    @unittest.skipIf(os.name == "nt", "no fair queue on Windows")
    def test_waiting_writer_goes_before_new_readers(self) -> None:
        path = self.path("rw.lock")
        first = hf.ReadWriteLock(path, is_singleton=False)
        first.acquire_read()
        writer = hf.ReadWriteLock(path, is_singleton=False)
        wrote = threading.Event()

        def write() -> None:
            with writer.write_lock(timeout=HANG):
                wrote.set()

        t = threading.Thread(target=write)
        t.start()
        # Wait until the writer is queued: a fair reader is refused then.
        deadline = time.monotonic() + HANG
        while True:
            try:
                hold.try_lock(lock_file=path, shared=True, fair=True).release()
            except hold.Busy:
                break
            self.assertLess(time.monotonic(), deadline, "the writer never queued")
            time.sleep(0.01)
        late = hf.ReadWriteLock(path, is_singleton=False)
        with self.assertRaises(hf.Timeout):
            late.acquire_read(blocking=False)
        self.assertFalse(wrote.is_set())
        first.release()
        t.join(HANG)
        self.assertTrue(wrote.is_set())


if __name__ == "__main__":
    warnings.simplefilter("default")
    unittest.main()
