"""filelock's AsyncReadWriteLock and hold.filelock's: a project's own tests
of it, run against both modules where filelock has it (its 3.21 release
and later), with tasks of one loop and with another process; then what
is hold's: the shared and exclusive kernel locks it holds."""

from __future__ import annotations

import asyncio
import importlib
import subprocess
from typing import Any, List, Optional

from helpers import HANG, TempDirTest, hold, need_filelock_feature

import hold.filelock

try:
    _real: Optional[Any] = importlib.import_module("filelock")
except ImportError:
    _real = None
#: filelock's own AsyncReadWriteLock, where the installed filelock has one.
real_async_rw: Optional[Any] = getattr(_real, "AsyncReadWriteLock", None) if _real is not None else None

#: A process holding a read or write lock of the module's (sync)
#: ReadWriteLock until its input ends.
_HOLDER = """
import importlib, sys
m = importlib.import_module(sys.argv[1])
with getattr(m.ReadWriteLock(sys.argv[2]), sys.argv[3] + "_lock")():
    print("holding", flush=True)
    sys.stdin.read()
"""


class ProjectAsyncRWTests:
    """What a project would test of its AsyncReadWriteLock use, against
    MODULE (the module's name: the holder process imports it too)."""

    MODULE = ""
    path: Any

    @property
    def m(self) -> Any:
        return importlib.import_module(self.MODULE)

    def run_async(self, coro: Any) -> Any:
        return asyncio.run(asyncio.wait_for(coro, HANG))

    async def closing(self, lock: Any) -> None:
        await lock.close()

    def test_tasks_read_together_and_a_writer_waits(self) -> None:
        path = self.path("data.rw")
        order: List[str] = []

        async def main() -> None:
            lock = self.m.AsyncReadWriteLock(path, is_singleton=False)
            both_in = asyncio.Event()
            readers_in = []

            async def reader(name: str) -> None:
                async with lock.read_lock():
                    readers_in.append(name)
                    if len(readers_in) == 2:
                        both_in.set()
                    await both_in.wait()  # both readers hold it at once
                    await asyncio.sleep(0.05)
                    order.append("read " + name)

            async def writer() -> None:
                await both_in.wait()
                async with lock.write_lock():
                    order.append("write")

            await asyncio.gather(reader("a"), reader("b"), writer())
            await self.closing(lock)

        self.run_async(main())
        self.assertEqual(sorted(order[:2]), ["read a", "read b"])
        self.assertEqual(order[2], "write")

    def test_reentrant_in_a_task_and_no_upgrade(self) -> None:
        path = self.path("data.rw")

        async def main() -> None:
            lock = self.m.AsyncReadWriteLock(path, is_singleton=False)
            async with lock.read_lock():
                async with lock.read_lock():
                    pass
                with self.assertRaises(RuntimeError):  # type: ignore[attr-defined]
                    await lock.acquire_write(timeout=0)
            async with lock.write_lock():
                async with lock.write_lock():
                    pass
                with self.assertRaises(RuntimeError):  # type: ignore[attr-defined]
                    await lock.acquire_read(timeout=0)
            proxy = await lock.acquire_read()
            async with proxy:
                pass
            with self.assertRaises(RuntimeError):  # type: ignore[attr-defined]
                await lock.release()  # nothing held
            await self.closing(lock)

        self.run_async(main())

    def test_another_process_reader_and_writer(self) -> None:
        path = self.path("data.rw")
        p = self.python(_HOLDER, self.MODULE, path, "read", stdin=subprocess.PIPE)  # type: ignore[attr-defined]
        assert p.stdout is not None
        self.assertEqual(p.stdout.readline().strip(), "holding")  # type: ignore[attr-defined]

        async def held_by_reader() -> None:
            lock = self.m.AsyncReadWriteLock(path, is_singleton=False)
            async with lock.read_lock(timeout=HANG):
                pass
            with self.assertRaises(self.m.Timeout):  # type: ignore[attr-defined]
                await lock.acquire_write(timeout=0.2)
            with self.assertRaises(self.m.Timeout):  # type: ignore[attr-defined]
                await lock.acquire_write(blocking=False)
            await self.closing(lock)

        try:
            self.run_async(held_by_reader())
        finally:
            p.communicate("", timeout=HANG)
        self.assertEqual(p.returncode, 0)  # type: ignore[attr-defined]

        async def free() -> None:
            lock = self.m.AsyncReadWriteLock(path, is_singleton=False)
            async with lock.write_lock(timeout=HANG):
                pass
            await self.closing(lock)

        self.run_async(free())


class WithFilelockAsyncRW(ProjectAsyncRWTests, TempDirTest):
    MODULE = "filelock"

    def setUp(self) -> None:
        need_filelock_feature(self, real_async_rw is not None, "AsyncReadWriteLock (filelock 3.21 or later has)")
        super().setUp()


class WithHoldFilelockAsyncRW(ProjectAsyncRWTests, TempDirTest):
    MODULE = "hold.filelock"


class HoldAsyncRWTest(TempDirTest):
    """What is hold's: one shared kernel lock for the reading tasks, an
    exclusive one for the writer, seen by hold.lock() and status."""

    def test_kernel_locks(self) -> None:
        path = self.path("data.rw")

        async def main() -> None:
            lock = hold.filelock.AsyncReadWriteLock(path)
            self.assertIs(lock._state, hold.filelock.AsyncReadWriteLock(path)._state)  # one path, one state
            async with lock.read_lock():
                self.assertEqual(hold.status(lock_file=path)["state"], "held shared")
                with hold.try_lock(lock_file=path, shared=True):
                    pass
                with self.assertRaises(hold.Busy):
                    hold.try_lock(lock_file=path)
            async with lock.write_lock():
                self.assertEqual(hold.status(lock_file=path)["state"], "held exclusive")
                with self.assertRaises(hold.Busy):
                    hold.try_lock(lock_file=path, shared=True)
            self.assertEqual(hold.status(lock_file=path)["state"], "free")
            await lock.close()
            with self.assertRaises(RuntimeError):
                await lock.acquire_read()

        asyncio.run(asyncio.wait_for(main(), HANG))

    def test_waiting_writer_goes_before_new_readers(self) -> None:
        path = self.path("data.rw")
        order: List[str] = []

        async def main() -> None:
            lock = hold.filelock.AsyncReadWriteLock(path, is_singleton=False)
            first_in = asyncio.Event()
            writer_waits = asyncio.Event()

            async def first() -> None:
                async with lock.read_lock():
                    first_in.set()
                    await writer_waits.wait()
                    await asyncio.sleep(0.05)
                    order.append("first reader")

            async def writer() -> None:
                await first_in.wait()
                writer_waits.set()  # the acquisition below waits before the late reader runs
                async with await lock.acquire_write():
                    order.append("writer")

            async def late_reader() -> None:
                await writer_waits.wait()
                async with lock.read_lock():
                    order.append("late reader")

            await asyncio.gather(first(), writer(), late_reader())

        asyncio.run(asyncio.wait_for(main(), HANG))
        self.assertEqual(order, ["first reader", "writer", "late reader"])

    def test_sqlite_database_refused(self) -> None:
        import sqlite3

        path = self.path("db.rw")
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE t (x)")
        con.commit()
        con.close()
        with self.assertRaises(ValueError):
            hold.filelock.AsyncReadWriteLock(path)


if __name__ == "__main__":
    import unittest

    unittest.main()
