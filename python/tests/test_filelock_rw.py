"""filelock's ReadWriteLock and hold.filelock's: a project's own tests of
it, run against both modules where filelock has it (its 3.21 release and
later; Debian's 3.9 has none), and with real processes: readers hold the
lock together, a writer alone. Then what is hold's: the kernel locks it
shares with hold.lock(), and that hold's and filelock's read-write locks,
which cannot exclude each other (filelock's is SQLite transactions), each
refuse the other's lock file."""

from __future__ import annotations

import importlib
import sqlite3
import subprocess
import threading
from typing import Any, List, Optional

from helpers import HANG, TempDirTest, hold, need_filelock_feature

import hold.filelock

try:
    _real: Optional[Any] = importlib.import_module("filelock")
except ImportError:
    _real = None
#: filelock's own ReadWriteLock, where the installed filelock has one.
real_rw: Optional[Any] = getattr(_real, "ReadWriteLock", None) if _real is not None else None

#: A process holding a read or write lock until its input ends.
_HOLDER = """
import importlib, sys
m = importlib.import_module(sys.argv[1])
with getattr(m.ReadWriteLock(sys.argv[2]), sys.argv[3] + "_lock")():
    print("holding", flush=True)
    sys.stdin.read()
"""


class ProjectRWTests:
    """What a project would test of its ReadWriteLock use, against MODULE
    (the module's name: the workers import it too)."""

    MODULE = ""
    path: Any

    @property
    def m(self) -> Any:
        return importlib.import_module(self.MODULE)

    def holder(self, mode: str, path: str) -> "subprocess.Popen[str]":
        p = self.python(_HOLDER, self.MODULE, path, mode, stdin=subprocess.PIPE)  # type: ignore[attr-defined]
        assert p.stdout is not None
        self.assertEqual(p.stdout.readline().strip(), "holding")  # type: ignore[attr-defined]
        return p

    def end(self, p: "subprocess.Popen[str]") -> None:
        out, err = p.communicate("", timeout=HANG)
        self.assertEqual(p.returncode, 0, err)  # type: ignore[attr-defined]

    def test_readers_together_writer_waits(self) -> None:
        path = self.path("data.rw")
        readers = [self.holder("read", path), self.holder("read", path)]  # both hold it at once
        lock = self.m.ReadWriteLock(path)
        try:
            with lock.read_lock(timeout=HANG):  # a third reader too
                pass
            with self.assertRaises(self.m.Timeout):  # type: ignore[attr-defined]
                with lock.write_lock(timeout=0.3):
                    pass
        finally:
            for p in readers:
                self.end(p)
        with lock.write_lock(timeout=HANG):
            pass

    def test_writer_alone(self) -> None:
        path = self.path("data.rw")
        writer = self.holder("write", path)
        lock = self.m.ReadWriteLock(path)
        try:
            for take in (lock.read_lock, lock.write_lock):
                with self.assertRaises(self.m.Timeout):  # type: ignore[attr-defined]
                    with take(timeout=0.3):
                        pass
            with self.assertRaises(self.m.Timeout):  # type: ignore[attr-defined]
                lock.acquire_read(blocking=False)
        finally:
            self.end(writer)
        with lock.read_lock(timeout=HANG):
            pass

    def test_reentrant_in_one_mode(self) -> None:
        lock = self.m.ReadWriteLock(self.path("data.rw"))
        with lock.read_lock():
            with lock.read_lock():
                with self.assertRaises(RuntimeError) as cm:  # type: ignore[attr-defined]
                    lock.acquire_write()
                self.assertIn("upgrade not allowed", str(cm.exception))  # type: ignore[attr-defined]
        with lock.write_lock():
            with lock.write_lock():
                with self.assertRaises(RuntimeError):  # type: ignore[attr-defined]
                    lock.acquire_read()
        with self.assertRaises(RuntimeError) as cm:  # type: ignore[attr-defined]
            lock.release()
        self.assertIn("not held", str(cm.exception))  # type: ignore[attr-defined]

    def test_threads_share_a_read_lock(self) -> None:
        lock = self.m.ReadWriteLock(self.path("data.rw"))
        inside: List[int] = []
        barrier = threading.Barrier(3, timeout=HANG)

        def read() -> None:
            with lock.read_lock():
                inside.append(1)
                barrier.wait()  # all three hold it at once

        threads = [threading.Thread(target=read) for _ in range(2)]
        for t in threads:
            t.start()
        with lock.read_lock():
            barrier.wait()
        for t in threads:
            t.join(HANG)
        self.assertEqual(len(inside), 2)  # type: ignore[attr-defined]

    def test_one_object_per_path(self) -> None:
        path = self.path("data.rw")
        lock = self.m.ReadWriteLock(path)
        self.assertIs(self.m.ReadWriteLock(path), lock)  # type: ignore[attr-defined]
        self.assertIs(self.m.ReadWriteLock.get_lock(path), lock)  # type: ignore[attr-defined]
        self.assertIsNot(self.m.ReadWriteLock(path, is_singleton=False), lock)  # type: ignore[attr-defined]
        with self.assertRaises(ValueError):  # type: ignore[attr-defined]
            self.m.ReadWriteLock(path, timeout=5)
        lock.close()


class WithFilelockRW(ProjectRWTests, TempDirTest):
    MODULE = "filelock"

    def setUp(self) -> None:
        # Debian's filelock (3.9) predates ReadWriteLock (3.21): the same
        # tests run against hold.filelock below all the same.
        need_filelock_feature(self, real_rw is not None, "ReadWriteLock (filelock 3.21 or later has)")
        super().setUp()


class WithHoldFilelockRW(ProjectRWTests, TempDirTest):
    MODULE = "hold.filelock"


class HoldRWTest(TempDirTest):
    def test_same_kernel_locks_as_hold_lock(self) -> None:
        path = self.path("data.rw")
        lock = hold.filelock.ReadWriteLock(path)
        with lock.read_lock():
            hold.try_lock(lock_file=path, shared=True).release()
            with self.assertRaises(hold.Busy):
                hold.try_lock(lock_file=path)
        with lock.write_lock():
            with self.assertRaises(hold.Busy):
                hold.try_lock(lock_file=path, shared=True)
            self.assertEqual(hold.status(lock_file=path)["state"], "held exclusive")

    def test_refuses_an_sqlite_database(self) -> None:
        # An SQLite database at the path: filelock's ReadWriteLock's file
        # once anything wrote to it.
        path = self.path("data.rw")
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE t (x)")
        con.commit()
        con.close()
        with self.assertRaises(ValueError) as cm:
            hold.filelock.ReadWriteLock(path)
        self.assertIn("SQLite database", str(cm.exception))

    def test_a_path_filelock_used_first(self) -> None:
        need_filelock_feature(self, real_rw is not None, "ReadWriteLock (filelock 3.21 or later has)")
        path = self.path("data.rw")
        with real_rw(path, is_singleton=False).write_lock():
            pass
        # filelock left the file empty: hold's claims it, and from then on
        # filelock refuses it.
        with hold.filelock.ReadWriteLock(path).read_lock():
            with self.assertRaises(sqlite3.DatabaseError):
                with real_rw(path, is_singleton=False).write_lock(timeout=0.3):
                    pass

    def test_its_lock_file_is_refused_by_sqlite(self) -> None:
        # Made before any process locks it, the file holds hold's owner
        # record: filelock's ReadWriteLock (SQLite) refuses it, even while
        # hold's readers alone hold it.
        path = self.path("data.rw")
        lock = hold.filelock.ReadWriteLock(path)
        with lock.read_lock():
            with self.assertRaises(sqlite3.DatabaseError):
                con = sqlite3.connect(path, timeout=0)
                try:
                    con.execute("BEGIN IMMEDIATE")
                finally:
                    con.close()
            if real_rw is not None:
                with self.assertRaises(sqlite3.DatabaseError):
                    with real_rw(path, is_singleton=False).write_lock(timeout=0.3):
                        pass


if __name__ == "__main__":
    import unittest

    unittest.main()
